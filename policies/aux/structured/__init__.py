"""Structured prediction: DMANet, ConfSleepNet, GOTabPFN, Pseudo-Mallows, zero-shot classifier expansion."""
