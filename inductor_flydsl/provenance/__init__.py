"""What a tuning result belongs to: the device, the software stack, and whether a
recorded result still holds for this process."""
