"""Training: fused AdamW, loss scaling, the Trainer and its checkpoints."""
from lutcore.train.amp import DynamicLossScaler, fp16_view, has_overflow
from lutcore.train.optim import AdamW, clip_grad_norm, global_grad_norm
from lutcore.train.trainer import Trainer, wsla_names

__all__ = ["AdamW", "clip_grad_norm", "global_grad_norm", "DynamicLossScaler", "fp16_view", "has_overflow",
           "Trainer", "wsla_names"]
