"""The 5.x timer store's checks (check.py), from recovery/timer's simulation of its next start."""
