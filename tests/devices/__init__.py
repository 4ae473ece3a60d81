"""Where learners and actors compute (fastrl/devices.py), and the engine on a GPU (the cuda marker)."""
