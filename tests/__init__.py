"""fastrl's tests: a regular package, so that a stray top-level ``tests`` package another distribution installs
(opensimplex, a dependency of crafter, ships one) cannot shadow ``tests.helpers``."""
