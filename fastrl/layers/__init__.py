"""The layers that ship with fastrl, a folder each (``builtin`` imports them); what a layer is, and how one is
registered, is ``fastrl.layer``, whose public names this package hands on so a plug-in may import either."""

from fastrl.layer import LAYERS, Layer, LayerNeeds, register_layer

__all__ = ["LAYERS", "Layer", "LayerNeeds", "register_layer"]
