"""The 5.x timer store as ``dump`` rows and ``info``'s timer section (over rmqtool.store.timer)."""
