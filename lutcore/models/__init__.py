"""Models built on the numpy-facing core: Mamba-1 and a GPT-style transformer."""
from lutcore.models.gpt import GPT, GPTConfig
from lutcore.models.mamba import Mamba1Block, MambaConfig, MambaLM

__all__ = ["MambaConfig", "Mamba1Block", "MambaLM", "GPTConfig", "GPT"]
