"""The typer application: one thin module per command, errors turned into exits here."""
import typer

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Forensic and recovery tool for Apache RocketMQ broker stores.")


def main() -> None:
    app()
