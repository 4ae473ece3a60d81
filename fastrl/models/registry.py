"""Build a policy network by name: a built-in, a registered name, or ``"package.module:factory"``.

Every model returned satisfies the policy interface: ``forward(obs)`` with ``obs`` in the env
dtype ``[B, *obs_shape]`` returns ``(logits [B, n_actions] float32, value [B] float32)``.
``build_model`` checks that with one dummy forward before returning, so a wrong custom model
is a clear ``ValueError`` at start-up rather than a crash inside a worker.

Parameter initialisation draws from torch's global RNG: seed it before calling.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from fastrl.envs.obs_layout import mask_part
from fastrl.models.action_mask import attach as attach_action_mask
from fastrl.models.board import BoardPolicy
from fastrl.models.cnn import ImpalaResNet, NatureCNN, ShallowCNN
from fastrl.models.mlp import MLPPolicy
from fastrl.models.multi import MultiInputPolicy
from fastrl.models.precision import PRECISIONS, resolve_precision
from fastrl.models.recurrent import hidden_size
from fastrl.models.uniform import UniformPolicy
from fastrl.registry import Registry

ModelFactory = Callable[..., nn.Module]

_IMAGE_MODELS: dict[str, type[nn.Module]] = {"nature": NatureCNN, "shallow": ShallowCNN, "impala": ImpalaResNet}
_HIDDEN_MODELS: dict[str, type[nn.Module]] = {"mlp": MLPPolicy, "multi": MultiInputPolicy, "board": BoardPolicy}
_BUILTIN_CLASSES: dict[str, type[nn.Module]] = {**_HIDDEN_MODELS, **_IMAGE_MODELS, "random": UniformPolicy}
# the Nature CNN's 8x8/4, 4x4/2 and 3x3/1 convolutions need images of at least 36x36; "auto" gives smaller
# ones the IMPALA ResNet, whose padded 3x3 convolutions and pools fit any size (a 7x7 view: 4, 2, 1)
NATURE_MIN_SIZE = 36
_BUILTIN_NAMES = ("auto", "mlp", "board", "multi", "random", *_IMAGE_MODELS)


def _factory_check(name: str, factory: Any) -> str | None:
    if name in _BUILTIN_NAMES:
        return f"{name!r} is a built-in model name ({_allowed()})"
    return None if callable(factory) else f"its factory is not callable: {factory!r}"


# the models registered by name (register_model) or by an installed package's "fastrl.models" entry point
MODELS: Registry[ModelFactory] = Registry("model", check=_factory_check)


def register_model(name: str, factory: ModelFactory | str, *, replace: bool = False) -> None:
    """Make ``factory`` (or its ``"package.module:attr"``) buildable as ``name``; it is called as
    ``factory(obs_shape=..., n_actions=..., **kwargs)`` and must return an ``nn.Module`` with the policy
    interface. Built-in names cannot be taken; another factory under a registered name only with
    ``replace=True`` (``fastrl.registry``'s rule for every extension point)."""
    MODELS.register(name, factory, replace=replace)


def build_model(
    name: str,
    obs_shape: Sequence[int],
    obs_dtype: Any,
    n_actions: int,
    hidden: Sequence[int] = (64, 64),
    kwargs: dict | None = None,
    precision: str = "fp32",
    normalize_obs: bool = False,
    device: torch.device | str = "cpu",
    normalize_value: bool = False,
    gaussian: bool = False,
    lstm: int = 0,
    obs_layout: Any = None,
) -> nn.Module:
    """The policy called ``name`` for observations of ``obs_shape``/``obs_dtype`` and a policy head
    of ``n_actions`` columns: the number of discrete actions, side-by-side logits of a MultiDiscrete
    space, or (``gaussian``, Box actions) 2 D columns, D means then D log-stds
    (``fastrl.envs.actions.ActionSpec.head_size``).

    ``name``: ``"auto"`` (``"nature"`` for 3-D image stacks of at least 36x36, ``"impala"`` for smaller
    ones, ``"multi"`` for a packed Dict row, with the same choice of trunk, ``"mlp"`` otherwise), ``"mlp"``,
    ``"nature"``, ``"shallow"``, ``"impala"``, a name given to ``register_model``, or
    ``"package.module:factory"``. ``hidden`` sizes the MLP and is ignored by the others.
    ``kwargs`` go to the model's constructor or factory (e.g. ``{"channels": [16, 32, 32]}``
    for ``"impala"``). ``precision``: ``"fp32"``, ``"bf16"`` (needs a model with
    ``set_precision``: the built-in CNNs) or ``"auto"`` (bf16 where the model has it and it pays on
    ``device``, see ``fastrl.models.precision``).
    ``normalize_obs``: the built-in models keep running observation statistics
    (``fastrl.models.normalizer``); a custom model normalises its own inputs. ``normalize_value``:
    their value head predicts returns in units of running return statistics (``algo.normalize_returns``).
    ``gaussian``: the built-in models end in ``fastrl.models.heads.GaussianHead`` (state-independent
    log-std); a custom model returns its own ``[B, 2 D]`` head; ``"random"`` gives N(0, 1).
    ``lstm`` = H > 0: the built-in models get an LSTM core of H units (``fastrl.models.recurrent``).
    ``obs_layout``: a Dict observation's ``fastrl.envs.obs_layout.ObsLayout``. A packed one (an image
    beside vectors, one uint8 row) takes ``"multi"`` (what ``"auto"`` picks for it), ``"random"`` or a
    custom model, which gets it as ``obs_layout=`` if its factory names that argument.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"model name must be a non-empty string ({_allowed()}), got {name!r}")
    shape = _check_obs_shape(name, obs_shape)
    dtype = _torch_dtype(name, obs_dtype)
    if isinstance(n_actions, bool) or not isinstance(n_actions, (int, np.integer)) or n_actions < 1:
        raise ValueError(f"model {name!r}: n_actions must be an int >= 1, got {n_actions!r}")
    n_actions = int(n_actions)
    if kwargs is not None and not isinstance(kwargs, dict):
        raise ValueError(f"model {name!r}: kwargs must be a dict, got {type(kwargs).__name__}")
    if isinstance(lstm, bool) or not isinstance(lstm, (int, np.integer)) or lstm < 0:
        raise ValueError(f"model {name!r}: lstm must be an int >= 0 (0: feed-forward), got {lstm!r}")
    if precision not in PRECISIONS:
        raise ValueError(
            f"model {name!r}: precision must be one of {', '.join(map(repr, PRECISIONS))}, got {precision!r}"
        )
    kw = dict(kwargs or {})
    resolved, make = _resolve(name, shape, kw, obs_layout)  # once, up front: what the name builds here ...
    computes_in = resolve_precision(precision, torch.device(device))  # ... and in which precision, given a choice
    if gaussian and mask_part(obs_layout) is not None:
        raise ValueError(f"model {name!r}: an action_mask part masks logits, and Box (Gaussian) actions have none")
    # the built-ins' own keywords asked for: their normalisers, and their heads (only the built-in heads need telling)
    flags: dict[str, bool | int] = {
        key: True for key, on in (("normalize_obs", normalize_obs), ("normalize_value", normalize_value)) if on
    }
    if gaussian:
        flags["gaussian"] = True
    if lstm:
        flags["lstm"] = int(lstm)
    model = _construct(name, resolved, make, shape, n_actions, list(hidden), kw, flags, obs_layout)
    _set_precision(name, model, precision, computes_in)
    check_interface(name, model, shape, dtype, n_actions)
    return attach_action_mask(model, obs_layout, n_actions)


def _resolve(name: str, shape: tuple[int, ...], kw: dict, layout: Any) -> tuple[str, ModelFactory]:
    """What ``name`` builds for observations of ``shape``, resolved once: the built-in's own name with its class
    (``"auto"`` chooses one, and the trunk of the ``"multi"`` it chooses, in ``kw``), or ``"custom"`` with the factory
    registered under ``name`` or imported from its ``"package.module:factory"``."""
    packed = layout is not None and layout.packed
    resolved = name
    if name == "auto":
        resolved = "multi" if packed else _auto_image_model(shape[1:]) if len(shape) == 3 else "mlp"
        if resolved == "multi" and "cnn" not in kw:
            kw["cnn"] = _auto_image_model(_image_hw(layout))
    if packed and resolved in ("mlp", *_IMAGE_MODELS):
        raise ValueError(
            f"model {name!r} cannot read these observations: a Dict with an image is stored as one packed "
            "uint8 row (fastrl.envs.obs_layout); use model.name = 'multi' (or 'auto')"
        )
    if resolved in _BUILTIN_CLASSES:
        return resolved, _BUILTIN_CLASSES[resolved]
    factory = _import_factory(name) if ":" in name else MODELS.find(name)
    if factory is None:
        raise ValueError(f"unknown model {name!r}; {_allowed()}")
    return "custom", factory


def _construct(
    name: str,
    resolved: str,
    make: ModelFactory,
    shape: tuple[int, ...],
    n_actions: int,
    hidden: list,
    kw: dict,
    flags: dict,
    layout: Any,
) -> nn.Module:
    """The model ``make`` builds, as ``_resolve`` found it for ``name`` (as the user wrote it, for messages): ``kw``
    are the user's ``model.kwargs``, ``flags`` the built-ins' own keywords asked for (``normalize_obs``,
    ``gaussian``, ``lstm``...)."""
    if resolved in _HIDDEN_MODELS:
        with_layout = {} if resolved == "mlp" else {"obs_layout": layout}
        own = {"hidden": hidden, **with_layout, **kw, **flags}
        return _build_builtin(name, make, shape, n_actions, own, "hidden")
    if resolved in _IMAGE_MODELS:
        if len(shape) != 3:
            raise ValueError(
                f"model {name!r} is an image model and needs a 3-D observation [C, H, W]; "
                f"got obs_shape {shape}; use 'mlp' or 'auto' for flat observations"
            )
        return _build_builtin(name, make, shape, n_actions, {**kw, **flags}, None)
    if {"normalize_obs", "normalize_value"} & flags.keys():
        raise ValueError(
            f"model.normalize_obs and algo.normalize_returns are for the built-in 'mlp', 'multi', "
            f"'nature', 'shallow' and 'impala'; model {name!r} must normalise its own observations "
            "and values"
        )
    if "lstm" in flags:
        raise ValueError(
            f"model.lstm is for the built-in 'mlp', 'multi', 'nature', 'shallow' and 'impala'; model "
            f"{name!r} is feed-forward: set model.lstm = 0"
        )
    if resolved == "random":
        return make(shape, n_actions)
    return _call_factory(name, make, shape, n_actions, _with_layout(make, kw, layout))


def _auto_image_model(hw: Sequence[int]) -> str:
    return "nature" if min(hw) >= NATURE_MIN_SIZE else "impala"


def _image_hw(layout: Any) -> tuple[int, int]:
    """Height and width of a packed Dict row's image part ([H, W, C] or [C, H, W])."""
    shape = layout.image.shape
    return (shape[0], shape[1]) if layout.channels_last else (shape[1], shape[2])


def _with_layout(factory: ModelFactory, kw: dict, obs_layout: Any) -> dict:
    """A custom factory that names an ``obs_layout`` argument gets the Dict observation's layout."""
    if obs_layout is None or "obs_layout" in kw:
        return kw
    try:
        takes = "obs_layout" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        takes = False
    return {**kw, "obs_layout": obs_layout} if takes else kw


def _set_precision(name: str, model: nn.Module, precision: str, computes_in: str) -> None:
    """``computes_in`` (``precision`` resolved for the device) for a model with ``set_precision``; bf16 asked
    for a model without one is refused."""
    if hasattr(model, "set_precision"):
        model.set_precision(computes_in)
    elif precision == "bf16":
        raise ValueError(
            f"model.precision = 'bf16' is for models with a set_precision method (the built-in "
            f"'nature', 'shallow' and 'impala'); model {name!r} has none: use 'fp32' or 'auto'"
        )


def _allowed() -> str:
    names = list(_BUILTIN_NAMES) + list(MODELS.names())
    return "allowed: " + ", ".join(repr(n) for n in names) + ", or 'package.module:factory'"


def _check_obs_shape(name: str, obs_shape: Any) -> tuple[int, ...]:
    try:
        shape = tuple(int(d) for d in obs_shape)
    except (TypeError, ValueError):
        raise ValueError(f"model {name!r}: obs_shape must be a sequence of ints, got {obs_shape!r}") from None
    if any(d < 1 for d in shape):
        raise ValueError(f"model {name!r}: obs_shape {shape} has a dimension < 1")
    return shape


def _torch_dtype(name: str, obs_dtype: Any) -> torch.dtype:
    if isinstance(obs_dtype, torch.dtype):
        return obs_dtype
    try:
        return torch.from_numpy(np.empty(0, dtype=np.dtype(obs_dtype))).dtype
    except (TypeError, ValueError):
        raise ValueError(f"model {name!r}: unsupported observation dtype {obs_dtype!r}") from None


def _build_builtin(
    name: str, cls: ModelFactory, shape: tuple[int, ...], n_actions: int, kw: dict, own: str | None
) -> nn.Module:
    try:
        return cls(obs_shape=shape, n_actions=n_actions, **kw)
    except TypeError as e:
        extra = sorted(k for k in kw if k not in (own, "gaussian", "obs_layout"))
        raise ValueError(f"model {name!r} ({cls.__name__}): bad kwargs {extra}: {e}") from None
    except ValueError as e:
        raise ValueError(f"model {name!r}: {e}") from None


def _import_factory(name: str) -> ModelFactory:
    module_name, _, attr = name.partition(":")
    if not module_name or not attr or ":" in attr:
        raise ValueError(f"model {name!r}: a custom model is written 'package.module:factory'")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as e:
        raise ValueError(f"model {name!r}: cannot import module {module_name!r}: {type(e).__name__}: {e}") from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise ValueError(f"model {name!r}: module {module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise ValueError(f"model {name!r}: {attr!r} in {module_name!r} is not callable")
    return obj


def _call_factory(name: str, factory: ModelFactory, shape: tuple[int, ...], n_actions: int, kw: dict) -> nn.Module:
    try:
        model = factory(obs_shape=shape, n_actions=n_actions, **kw)
    except Exception as e:
        raise ValueError(
            f"model {name!r}: factory(obs_shape={shape}, n_actions={n_actions}, "
            f"**{kw!r}) raised {type(e).__name__}: {e}"
        ) from e
    if not isinstance(model, nn.Module):
        raise ValueError(f"model {name!r}: factory returned {type(model).__name__}, not a torch.nn.Module")
    return model


def check_interface(name: str, model: nn.Module, shape: tuple[int, ...], dtype: torch.dtype, n_actions: int) -> None:
    """One dummy forward of 2 zero observations (eval mode, no grad, RNG state kept)."""
    param = next(model.parameters(), None)
    device = param.device if param is not None else torch.device("cpu")
    obs = torch.zeros((2, *shape), dtype=dtype, device=device)
    recurrent = hidden_size(model)
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            out = model(obs, torch.zeros((2, recurrent), device=device)) if recurrent else model(obs)
            out = out[:2] if recurrent else out  # the state's shape is the core's own
    except Exception as e:
        raise ValueError(
            f"model {name!r}: forward failed on a dummy batch {tuple(obs.shape)} {dtype}: {type(e).__name__}: {e}"
        ) from e
    finally:
        for m, training in modes:
            m.training = training
    want = f"(logits [2, {n_actions}] float32, value [2] float32)"
    if not (isinstance(out, (tuple, list)) and len(out) == 2 and all(isinstance(t, torch.Tensor) for t in out)):
        raise ValueError(f"model {name!r}: forward must return {want}, got {type(out).__name__}")
    logits, value = out
    if logits.device != device or value.device != device:  # torch's error would come later, naming no model
        raise ValueError(
            f"model {name!r}: forward must return tensors on its parameters' device {device}, got logits on "
            f"{logits.device} and value on {value.device}"
        )
    if (
        tuple(logits.shape) != (2, n_actions)
        or tuple(value.shape) != (2,)
        or logits.dtype != torch.float32
        or value.dtype != torch.float32
    ):
        raise ValueError(
            f"model {name!r}: forward must return {want} for a batch of 2, got logits "
            f"{list(logits.shape)} {logits.dtype} and value {list(value.shape)} {value.dtype}"
        )
