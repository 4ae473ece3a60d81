"""Many machines: under ``torchrun`` every rank is a whole fastrl engine and only the learners talk
across ranks. Everything that crosses ranks lives here:

- ``launch``            what part of the run this process is: ``SingleProcess`` (all of it) or ``TorchrunRank``
                        (its share of the envs, its directory in the run's), chosen once by ``this_launch``;
- ``rank_link``         what the ranks' main processes tell each other through torchrun's store (run
                        directory, resumed checkpoint, heartbeat, metrics, failures);
- ``cohort``            the ranks' learners as one: the gradient all-reduce, merged statistics, agreed barriers;
- ``gradient_buckets``  that all-reduce in buckets started while backward still runs (DDP's overlap);
- ``gala_ring``         gala's ring messages between ranks;
- ``gala_group``        gala's all-reduce mixing and consensus rounds over every rank's learners.

Without torchrun (one rank) nothing here runs but ``launch.SingleProcess`` and ``cohort.Solo``, the one-rank
stand-ins.
"""
