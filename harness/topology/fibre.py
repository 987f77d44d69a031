"""Propagation delay of light in optical fibre.

Standard single-mode fibre (ITU-T G.652) has a group index of about 1.468 at 1550 nm, so light
travels at c / 1.468 = 204,200 km/s, i.e. 4.90 us per km one way. This is the figure the
hyperscaler scale-across papers quote as "about 5 us per km".
"""

from __future__ import annotations

SPEED_OF_LIGHT_KM_S = 299_792.458
FIBRE_GROUP_INDEX = 1.468
FIBRE_US_PER_KM = FIBRE_GROUP_INDEX / SPEED_OF_LIGHT_KM_S * 1e6  # 4.897 us/km


def one_way_delay_us(distance_km: float) -> float:
    return distance_km * FIBRE_US_PER_KM
