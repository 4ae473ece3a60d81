"""Many machines: under ``torchrun`` every rank is a whole fastrl engine and only the learners talk
across ranks. Everything that crosses ranks lives here:

- ``launch``            this rank (its share of the envs) and what the ranks' main processes tell each
                        other through torchrun's store (run directory, heartbeat, metrics, failures);
- ``cohort``            the ranks' learners as one: the gradient all-reduce, merged statistics, agreed barriers;
- ``gradient_buckets``  that all-reduce in buckets started while backward still runs (DDP's overlap);
- ``gala_ring``         gala's ring messages between ranks;
- ``gala_group``        gala's all-reduce mixing and consensus rounds over every rank's learners.

Without torchrun (one rank) nothing here runs but ``cohort.Solo``, the one-rank stand-in.
"""
