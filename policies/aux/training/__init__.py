"""Training dynamics, quantisation and weight editing: LLR, RobuQ, HAMU, SPARD, Theseus."""
