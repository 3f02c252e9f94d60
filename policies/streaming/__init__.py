"""Building blocks of streaming deep RL: sparse init, affine-free LayerNorm networks, ObGD, normalisers, SPR."""
