"""What the plugin did in this process: its counters and the ``stats()`` view of them."""
