"""What a GEMM problem is, as the tuning DB keys it: its tensors, epilogue, dynamic-M
buckets, grouped routings and the matmul settings that change its numerics."""
