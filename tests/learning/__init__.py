"""The learner (fastrl/learning): its extensions, its way to its device and its deferred checks."""
