"""Recovery: a pure plan (plan.py), an apply that backs up first (apply.py, manifest.py), undo (undo.py)."""
from rmqtool.recovery.apply import Applied, apply_plan, default_backup_dir
from rmqtool.recovery.plan import Action, QueueCut, RecoveryPlan, plan_recovery
from rmqtool.recovery.undo import Restored, undo

__all__ = ["Action", "Applied", "QueueCut", "RecoveryPlan", "Restored", "apply_plan", "default_backup_dir",
           "plan_recovery", "undo"]
