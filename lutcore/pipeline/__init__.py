"""Pipeline stages: a Hugging Face checkpoint (llama, qwen2, mistral, gpt2,
mamba) split into contiguous stages that run in one process or one Ray actor
each — and the split changes no bit of the result.

Design (what lives where, dependencies pointing down):

    arch.py      config.json -> ArchSpec; Hugging Face tensor names per family
    shard.py     StagePlan, plan_stages / plan_from_splits, to_kn,
                 load_stage_weights (only one stage's tensors)
    stage.py     Stage: embed / run_layers (KV cache, Mamba state) / readout /
                 pick_token; float32 or block-scaled int8 through units
    _common.py   what the pipeline and its transports share: StageFailure,
                 HopChecksumError, next_token, ring_options (imports neither)
    pipeline.py  Pipeline: the generation loop over a ring of stages (local)
    _ray.py      the Ray ring: one actor per stage, checksummed hops

Nothing here prints; the CLI (``lutcore generate --model``, ``lutcore inspect``)
is the only user-facing front end.  Ray is imported only for transport="ray".
"""
from lutcore.pipeline.arch import (SUPPORTED_MODEL_TYPES, ArchSpec, head_tensors, layer_tensors,
                                   tensor_layout, tensor_shapes)
from lutcore.pipeline._common import HopChecksumError, StageFailure
from lutcore.pipeline.pipeline import Pipeline
from lutcore.pipeline.shard import (StagePlan, load_stage_weights, plan_from_splits, plan_stages,
                                    stage_tensor_names, to_kn)
from lutcore.pipeline.stage import Stage, StageCache

__all__ = ["ArchSpec", "SUPPORTED_MODEL_TYPES", "head_tensors", "layer_tensors", "tensor_layout",
           "tensor_shapes", "StagePlan", "to_kn", "plan_stages", "plan_from_splits", "load_stage_weights",
           "stage_tensor_names", "Stage", "StageCache", "Pipeline", "StageFailure", "HopChecksumError"]
