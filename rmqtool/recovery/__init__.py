"""Recovery: a pure plan (plan.py), an apply that backs up first (apply.py, manifest.py), undo
(undo.py). Import from the module that holds a name: the package loads nothing itself, so a
family's recovery (qmq/) does not load RocketMQ's."""
