"""Synthetic polysomnography (labelled synthetic everywhere it is used): hypnograms and two views of each epoch.

- Hypnogram: a Markov chain over W, N1, N2, N3, REM with per-30-s-epoch transition probabilities shaped like adult
  sleep (long N2/N3/REM bouts, N1 as a short bridge).
- EEG-like view (5-class): one 30-s channel at 50 Hz whose spectrum mixes a 1/f background with stage-dependent
  delta / theta / alpha / sigma (spindle) / beta power, with per-epoch and per-recording variability; features are
  the log band powers measured back from the generated signal. N1 and REM look alike here, as in real EEG.
- EOG/EMG-like view (3-class W / NREM / REM): an EOG channel (slow rolling and rapid eye movements) and an EMG
  channel (high-frequency muscle tone, lowest in REM); features are log powers of three bands.
- Misalignment: in a chosen share of recordings the EOG/EMG view is shifted by 1-2 epochs against the hypnogram and
  15 % of its epochs carry a movement artefact (broadband high-amplitude burst, which reads as wake).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FS = 50  # Hz
EPOCH_S = 30
TRANSITIONS = np.array([
    #  W     N1    N2    N3    REM
    [0.90, 0.08, 0.01, 0.00, 0.01],  # W
    [0.08, 0.58, 0.30, 0.00, 0.04],  # N1
    [0.02, 0.04, 0.87, 0.05, 0.02],  # N2
    [0.01, 0.01, 0.08, 0.90, 0.00],  # N3
    [0.03, 0.04, 0.02, 0.00, 0.91],  # REM
])
EEG_BANDS = ((0.5, 4), (4, 8), (8, 12), (12, 15), (15, 25))  # delta, theta, alpha, sigma, beta (Hz)
EEG_PROFILE = np.array([  # relative band amplitude per stage
    [1.0, 1.0, 3.0, 1.0, 2.0],  # W: alpha, beta
    [1.5, 2.4, 1.2, 1.0, 1.1],  # N1: theta
    [2.0, 1.6, 0.8, 2.5, 0.8],  # N2: spindles (sigma)
    [5.0, 1.5, 0.6, 0.9, 0.5],  # N3: slow waves
    [1.3, 2.3, 1.1, 0.8, 1.3],  # REM: theta, like N1
])
EOG_EMG_BANDS = ((0.3, 2), (2, 6), (15, 25))  # eye movements (slow / rapid), muscle tone
EOG_EMG_PROFILE = np.array([
    [2.0, 2.0, 3.0],  # W: blinks, high tone
    [2.2, 0.8, 1.5],  # N1: slow rolling eye movements
    [0.8, 0.6, 1.2],  # N2
    [0.6, 0.5, 1.0],  # N3
    [1.2, 3.5, 0.3],  # REM: rapid eye movements, atonia
])
COARSE_OF_STAGE = np.array([0, 1, 1, 1, 2])


@dataclass
class Recording:
    """One night: stages [T], EEG features [T, 5], EOG/EMG features [T, 3], whether the second view is misaligned."""

    stages: np.ndarray
    eeg: np.ndarray
    eog_emg: np.ndarray
    misaligned: bool


def hypnogram(rng: np.random.Generator, epochs: int) -> np.ndarray:
    """A stage sequence from the Markov chain, starting awake."""
    out = np.zeros(epochs, dtype=np.int64)
    for t in range(1, epochs):
        out[t] = rng.choice(5, p=TRANSITIONS[out[t - 1]])
    return out


def band_signal(rng: np.random.Generator, amplitudes: np.ndarray, bands: tuple, background: float) -> np.ndarray:
    """Epoch signals [T, FS*EPOCH_S]: random-phase spectra with the given band amplitudes [T, bands] + 1/f floor."""
    n = FS * EPOCH_S
    freqs = np.fft.rfftfreq(n, 1 / FS)
    gain = background / np.maximum(freqs, 0.5)[None, :].repeat(len(amplitudes), 0)
    for j, (lo, hi) in enumerate(bands):
        gain[:, (freqs >= lo) & (freqs < hi)] += amplitudes[:, j:j + 1]
    spec = gain * (rng.standard_normal(gain.shape) + 1j * rng.standard_normal(gain.shape))
    return np.fft.irfft(spec, n=n)


def band_log_powers(signal: np.ndarray, bands: tuple) -> np.ndarray:
    """Log mean power per band of each epoch [T, n] → [T, bands] (what a feature extractor would measure)."""
    freqs = np.fft.rfftfreq(signal.shape[-1], 1 / FS)
    power = np.abs(np.fft.rfft(signal, axis=-1)) ** 2
    return np.stack([np.log(power[:, (freqs >= lo) & (freqs < hi)].mean(-1)) for lo, hi in bands], axis=-1)


def recording(rng: np.random.Generator, epochs: int, misaligned: bool) -> Recording:
    """One synthetic night with both views (see the module docstring)."""
    stages = hypnogram(rng, epochs)
    subject = np.exp(rng.normal(0, 0.15, 5))  # per-recording band gains
    eeg_amp = EEG_PROFILE[stages] * subject * np.exp(rng.normal(0, 0.35, (epochs, 5)))
    eeg = band_log_powers(band_signal(rng, eeg_amp, EEG_BANDS, 0.3), EEG_BANDS)
    view_stages = stages
    if misaligned:
        shift = int(rng.choice([-2, -1, 1, 2]))
        view_stages = np.roll(stages, shift)
    aux_amp = EOG_EMG_PROFILE[view_stages] * np.exp(rng.normal(0, 0.15, 3)) * np.exp(rng.normal(0, 0.3, (epochs, 3)))
    if misaligned:
        artefact = rng.random(epochs) < 0.15
        aux_amp[artefact] += rng.uniform(3, 6, (int(artefact.sum()), 1))  # broadband movement burst
    aux = band_log_powers(band_signal(rng, aux_amp, EOG_EMG_BANDS, 0.2), EOG_EMG_BANDS)
    return Recording(stages, eeg, aux, misaligned)


def cohort(seed: int, count: int, epochs: int, misaligned_share: float) -> list[Recording]:
    """``count`` recordings; a ``misaligned_share`` of them (rounded, chosen at random) carry the misaligned view."""
    rng = np.random.default_rng(seed)
    flags = np.zeros(count, dtype=bool)
    flags[rng.permutation(count)[: round(misaligned_share * count)]] = True
    return [recording(rng, epochs, bool(flag)) for flag in flags]
