"""FlyDSL kernel templates owned by inductor-flydsl."""
