"""Watching a run (fastrl/telemetry): metrics, TensorBoard, W&B, the progress line, fastrl plot."""
