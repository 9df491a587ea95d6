"""Models built on the numpy-facing core: Mamba-1 (and later a GPT)."""
from lutcore.models.mamba import Mamba1Block, MambaConfig, MambaLM

__all__ = ["MambaConfig", "Mamba1Block", "MambaLM"]
