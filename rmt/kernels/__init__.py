"""Every ``@njit`` function of ``rmt`` lives in this package, and only here."""
