"""What a time means: how a choice is timed (graph or eager) and how far a timing can be
trusted (its noise)."""
