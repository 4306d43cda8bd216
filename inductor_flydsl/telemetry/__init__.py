"""What the plugin did in this process and told the user: its counters, the ``stats()``
view of them, and one warning per problem (``user_warnings``)."""
