"""The layers built on the core (fastrl.layers): multi-agent play, self-play, named policies, reward scaling, gala's
gossip, and the boundary the core keeps with them."""
