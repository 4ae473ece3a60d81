"""``fastrl export`` / ``fastrl.export_policy``: a trained policy as one file that runs without fastrl.

The file holds everything between the env's observation and the policy's outputs, so its user feeds
the observation exactly as the run's env gave it (Atari: the 4x84x84 uint8 stack) and reads numbers
that need no fastrl code after them:

- inside: uint8 scaling, the observation normaliser's running statistics (``model.normalize_obs``),
  the value's de-normalisation (``algo.normalize_returns``), the LSTM core (its state an input and
  an output);
- inputs: ``obs`` ``[B, *obs_shape]`` in the env's dtype (a Dict of vectors: its
  ``gymnasium.spaces.flatten`` row, float32, the row fastrl stores; an ``action_mask`` part in it masks
  the logits inside the file); a recurrent policy also ``hidden`` ``[B, 2H]`` (h then c; zeros at an
  episode's start);
- outputs: ``logits`` ``[B, n]`` (MultiDiscrete: each dimension's logits side by side), or for Box
  actions ``mean`` and ``log_std`` ``[B, D]``; ``value`` ``[B]``; a recurrent policy's
  ``hidden_out``; with ``greedy``, ``action`` first: the argmax (per dimension) or the mean.

Both formats are traced from the eager model ``fastrl.load_policy`` returns, so a compiled run's
checkpoint exports as any other. ``onnx`` needs the ``fastrl-engine[export]`` extra (onnx, onnxscript,
onnxruntime: the exported file is checked against the eager model with onnxruntime before it is
kept); ``torchscript`` needs only torch (``torch.jit.load`` in Python, ``torch::jit::load`` in C++).
"""

from __future__ import annotations

import io
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn

from fastrl.config import ConfigError
from fastrl.envs.actions import BOX, MULTI_DISCRETE
from fastrl.errors import install_hint

log = logging.getLogger(__name__)

FORMATS = ("onnx", "torchscript")
SUFFIX = {"onnx": ".onnx", "torchscript": ".pt"}
ONNX_OPSET = 18
EXAMPLE_BATCH = 3  # traced at this batch size; the batch axis stays dynamic
CHECK_TOLERANCE = 1e-5  # the exported file against the eager model, on the example batch


@dataclass(frozen=True)
class ExportedPolicy:
    """What ``export_policy`` wrote: the file, its format, and the names and shapes of its inputs and outputs
    (``B`` the batch, any size)."""

    path: Path
    format: str
    inputs: dict[str, list] = field(default_factory=dict)  # name -> [B, ...] and dtype
    outputs: dict[str, list] = field(default_factory=dict)
    checkpoint: str = ""
    params: str = ""


class PortablePolicy(nn.Module):
    """The eager policy behind a fixed, documented signature: ``forward(obs[, hidden])`` -> the outputs above."""

    def __init__(self, model: nn.Module, action_kind: str, greedy: bool, nvec: tuple[int, ...] = ()):
        super().__init__()
        self.model = model
        self.gaussian = action_kind == BOX
        self.nvec = list(nvec) if action_kind == MULTI_DISCRETE else []
        self.greedy = greedy
        self.recurrent = int(getattr(model, "hidden_size", 0)) > 0

    def output_names(self) -> list[str]:
        names = ["mean", "log_std", "value"] if self.gaussian else ["logits", "value"]
        if self.recurrent:
            names.append("hidden_out")
        return (["action"] if self.greedy else []) + names

    def forward(self, obs: Tensor, hidden: Tensor | None = None) -> tuple[Tensor, ...]:
        out = self.model(obs, hidden) if self.recurrent else self.model(obs)
        head, value = out[0].float(), out[1].float()
        heads = list(head.chunk(2, dim=-1)) if self.gaussian else [head]
        outputs = heads + [value] + ([out[2]] if self.recurrent else [])
        if self.greedy:
            outputs.insert(0, self._greedy(head))
        return tuple(outputs)

    def _greedy(self, head: Tensor) -> Tensor:
        if self.gaussian:
            return head.chunk(2, dim=-1)[0]
        if self.nvec:
            return torch.stack([block.argmax(-1) for block in head.split(self.nvec, dim=-1)], dim=-1)
        return head.argmax(-1)


def export_policy(
    target: str | Path,
    format: str = "onnx",
    out: str | Path | None = None,
    params: str | int = "auto",
    greedy: bool = False,
    trust_code: bool = False,
) -> ExportedPolicy:
    """Write a run's trained policy as an ONNX or TorchScript file (see the module's doc for its inputs and
    outputs). ``target``, ``params`` and ``trust_code`` are as ``fastrl eval``'s and ``fastrl.load_policy``'s;
    ``out`` defaults to ``RUN_DIR/policy.onnx`` (or ``policy.pt``). The file is checked against the eager policy
    on an example batch before this returns. Raises ``ConfigError`` for bad input."""
    from fastrl.evaluation import load_trained

    if format not in FORMATS:
        raise ConfigError(f"format = {format!r}; allowed: {', '.join(map(repr, FORMATS))}")
    if not isinstance(greedy, bool):
        raise ConfigError(f"greedy = {greedy!r}: expected True or False")
    if format == "onnx":
        _require_onnx()
    trained = load_trained(target, params, trust_code)
    info = trained.env_info
    if info.obs_layout is not None and info.obs_layout.packed:
        raise ConfigError(
            f"checkpoint {str(trained.path)!r}: its env {trained.config.env.id!r} observes a Dict "
            "with an image (stored as one packed byte row); export takes Box observations and Dicts "
            "of vectors"
        )
    path = _out_path(out, trained.path, format)
    model = trained.model
    if hasattr(model, "set_precision"):  # a run that trained in bf16 exports its float32 parameters in float32
        model.set_precision("fp32")
    policy = PortablePolicy(model, info.action.kind, greedy, info.action.nvec).eval()
    example = _example_inputs(policy, info)
    names = ["obs", "hidden"][: len(example)]
    with torch.no_grad():
        expected = policy(*example)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")  # written and checked here, then renamed over path:
    try:  # a failed export (a full disk, a wrong output) leaves the file that was there as it was
        if format == "torchscript":
            _write_torchscript(policy, example, tmp)
            got = _run_torchscript(tmp, example)
        else:
            _write_onnx(policy, example, names, tmp)
            got = _run_onnx(tmp, dict(zip(names, (x.numpy() for x in example))))
        _check_outputs(policy.output_names(), expected, got, path)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    log.info("exported %s (%s) to %s", trained.path, trained.params, path)
    return ExportedPolicy(
        path,
        format,
        _shapes(names, example),
        _shapes(policy.output_names(), expected),
        str(trained.path),
        trained.params,
    )


def _require_onnx() -> None:
    missing = [name for name in ("onnx", "onnxscript", "onnxruntime") if not _importable(name)]
    if missing:
        raise ConfigError(f"format = 'onnx' needs {', '.join(missing)}: {install_hint('export')}")


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


def _out_path(out: str | Path | None, checkpoint: Path, format: str) -> Path:
    from fastrl.evaluation import run_dir_of

    if out is None:
        run_dir = run_dir_of(checkpoint) or checkpoint.parent
        return run_dir / f"policy{SUFFIX[format]}"
    path = Path(out)
    if path.is_dir():
        raise ConfigError(f"--out {str(path)!r} is a directory; give a file name such as policy{SUFFIX[format]}")
    if not path.parent.is_dir():
        raise ConfigError(f"--out {str(path)!r}: its folder {str(path.parent)!r} does not exist")
    return path


def _example_inputs(policy: PortablePolicy, info) -> tuple[Tensor, ...]:
    """A batch of random observations in the env's dtype (and a random state), drawn without touching
    the caller's RNG; random, not zeros, so the check below would see a wrong normaliser or scaling."""
    generator = torch.Generator().manual_seed(0)
    shape = (EXAMPLE_BATCH, *info.obs_shape)
    if np.dtype(info.obs_dtype) == np.uint8:
        obs = torch.randint(0, 256, shape, generator=generator, dtype=torch.uint8)
    else:
        obs = torch.randn(shape, generator=generator).to(_torch_dtype(info.obs_dtype))
    if not policy.recurrent:
        return (obs,)
    hidden = torch.randn((EXAMPLE_BATCH, policy.model.hidden_size), generator=generator)
    return obs, hidden


def _torch_dtype(name: str) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, np.dtype(name))).dtype


def _write_torchscript(policy: PortablePolicy, example: tuple[Tensor, ...], path: Path) -> None:
    with torch.no_grad():
        traced = torch.jit.trace(policy, example, check_trace=False)
    traced = torch.jit.freeze(traced.eval())
    buffer = io.BytesIO()  # torch's own file writer aborts the process on a full disk; Python's raises OSError
    torch.jit.save(traced, buffer)
    with open(path, "wb") as f:
        f.write(buffer.getbuffer())


def _run_torchscript(path: Path, example: tuple[Tensor, ...]) -> list[np.ndarray]:
    loaded = torch.jit.load(str(path))
    with torch.no_grad():
        return [t.numpy() for t in loaded(*example)]


def _write_onnx(policy: PortablePolicy, example: tuple[Tensor, ...], names: list[str], path: Path) -> None:
    batch = torch.export.Dim("batch")
    shapes = {"obs": {0: batch}, "hidden": {0: batch}} if policy.recurrent else {"obs": {0: batch}}
    with torch.no_grad():
        program = torch.onnx.export(
            policy,
            example,
            input_names=names,
            output_names=policy.output_names(),
            dynamic_shapes=shapes,
            opset_version=ONNX_OPSET,
            dynamo=True,
            verbose=False,
        )
    program.save(str(path))


def _run_onnx(path: Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def _check_outputs(names: list[str], expected: tuple[Tensor, ...], got: list[np.ndarray], path: Path) -> None:
    for name, want, have in zip(names, expected, got, strict=True):
        want = want.numpy()
        if want.shape != have.shape or not np.allclose(want, have, rtol=CHECK_TOLERANCE, atol=CHECK_TOLERANCE):
            raise RuntimeError(
                f"the exported {path.name}'s {name!r} differs from the eager policy's "
                f"(shape {have.shape} vs {want.shape}); nothing was written"
            )


def _shapes(names: list[str], tensors: tuple[Tensor, ...]) -> dict[str, list]:
    return {
        name: [["B", *tensor.shape[1:]], str(tensor.dtype).removeprefix("torch.")]
        for name, tensor in zip(names, tensors)
    }
