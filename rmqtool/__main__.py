from rmqtool.cli.app import main

main()
