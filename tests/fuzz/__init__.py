"""Generated bad input (Hypothesis), five families: configs and --set lines, the command line, run directories,
what a user's env returns, plug-ins (docs/faults-and-resume.md, "Generated bad input"). A seeded sample runs in
the default tier; ``FASTRL_FUZZ=full`` (``bench/fuzz.sh``) runs the full count."""
