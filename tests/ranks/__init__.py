"""Many ranks under torchrun (fastrl/ranks): launches, gradient buckets, gala across ranks."""
