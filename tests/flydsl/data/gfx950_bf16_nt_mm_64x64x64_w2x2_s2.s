	.amdgcn_target "amdgcn-amd-amdhsa-unknown-gfx950"
	.amdhsa_code_object_version 6
	.text
	.globl	gemm_kernel_0
	.p2align	8
	.type	gemm_kernel_0,@function
gemm_kernel_0:
	s_load_dwordx4 s[4:7], s[0:1], 0x60
	v_lshrrev_b32_e32 v10, 3, v0
	v_or_b32_e32 v8, 32, v10
	v_bfe_u32 v16, v0, 4, 2
	s_waitcnt lgkmcnt(0)
	s_add_i32 s3, s5, 63
	s_ashr_i32 s8, s3, 31
	s_lshr_b32 s8, s8, 26
	s_add_i32 s8, s3, s8
	s_ashr_i32 s12, s8, 6
	s_andn2_b32 s8, s8, 63
	s_cmp_lg_u32 s3, s8
	s_cselect_b64 s[8:9], -1, 0
	s_cmp_lt_i32 s3, 0
	s_cselect_b64 s[10:11], -1, 0
	s_and_b64 s[8:9], s[10:11], s[8:9]
	s_subb_u32 s3, s12, 0
	s_add_i32 s10, s4, 63
	s_ashr_i32 s8, s10, 31
	s_lshr_b32 s8, s8, 26
	s_add_i32 s8, s10, s8
	s_ashr_i32 s14, s8, 6
	s_andn2_b32 s8, s8, 63
	s_cmp_lg_u32 s10, s8
	s_cselect_b64 s[8:9], -1, 0
	s_cmp_lt_i32 s10, 0
	s_cselect_b64 s[10:11], -1, 0
	s_lshl_b32 s12, s3, 3
	s_abs_i32 s13, s12
	v_cvt_f32_u32_e32 v1, s13
	s_and_b64 s[8:9], s[10:11], s[8:9]
	s_xor_b32 s10, s2, s12
	s_ashr_i32 s16, s10, 31
	v_rcp_f32_e32 v1, v1
	s_sub_i32 s10, 0, s13
	s_abs_i32 s15, s2
	v_mul_f32_e32 v1, 0x4f7ffffe, v1
	v_cvt_u32_f32_e32 v1, v1
	s_nop 0
	v_readfirstlane_b32 s11, v1
	s_mul_i32 s10, s10, s11
	s_mul_hi_u32 s10, s11, s10
	s_add_i32 s11, s11, s10
	s_mul_hi_u32 s10, s15, s11
	s_mul_i32 s11, s10, s13
	s_sub_i32 s11, s15, s11
	s_add_i32 s15, s10, 1
	s_sub_i32 s17, s11, s13
	s_cmp_ge_u32 s11, s13
	s_cselect_b32 s10, s15, s10
	s_cselect_b32 s11, s17, s11
	s_add_i32 s15, s10, 1
	s_cmp_ge_u32 s11, s13
	s_cselect_b32 s10, s15, s10
	s_xor_b32 s15, s10, s16
	s_sub_i32 s10, s15, s16
	s_mul_i32 s17, s10, s12
	s_cmp_lg_u32 s2, s17
	s_cselect_b64 s[10:11], -1, 0
	s_xor_b32 s3, s3, s2
	s_cmp_lt_i32 s3, 0
	s_cselect_b64 s[12:13], -1, 0
	s_and_b64 s[10:11], s[12:13], s[10:11]
	s_subb_u32 s3, s15, s16
	s_lshl_b32 s3, s3, 3
	s_cmp_lg_u64 s[8:9], 0
	s_subb_u32 s14, s14, s3
	s_min_i32 s15, s14, 8
	s_abs_i32 s16, s15
	v_cvt_f32_u32_e32 v1, s16
	s_sub_i32 s19, 0, s16
	s_sub_i32 s17, s2, s17
	s_xor_b32 s2, s17, s15
	v_rcp_f32_e32 v1, v1
	s_ashr_i32 s18, s2, 31
	s_abs_i32 s2, s17
	s_load_dwordx2 s[12:13], s[0:1], 0x0
	s_load_dwordx2 s[10:11], s[0:1], 0x18
	v_mul_f32_e32 v1, 0x4f7ffffe, v1
	v_cvt_u32_f32_e32 v1, v1
	s_load_dwordx2 s[8:9], s[0:1], 0x70
	v_readfirstlane_b32 s20, v1
	s_mul_i32 s19, s19, s20
	s_mul_hi_u32 s19, s20, s19
	s_add_i32 s20, s20, s19
	s_mul_hi_u32 s19, s2, s20
	s_mul_i32 s20, s19, s16
	s_sub_i32 s2, s2, s20
	s_add_i32 s20, s19, 1
	s_sub_i32 s21, s2, s16
	s_cmp_ge_u32 s2, s16
	s_cselect_b32 s19, s20, s19
	s_cselect_b32 s2, s21, s2
	s_add_i32 s20, s19, 1
	s_cmp_ge_u32 s2, s16
	s_cselect_b32 s2, s20, s19
	s_xor_b32 s16, s2, s18
	s_sub_i32 s2, s16, s18
	s_mul_i32 s2, s2, s15
	s_sub_i32 s15, s17, s2
	s_add_i32 s19, s3, s15
	s_cmp_lg_u32 s17, s2
	s_cselect_b64 s[2:3], -1, 0
	s_xor_b32 s14, s14, s17
	s_cmp_lt_i32 s14, 0
	s_cselect_b64 s[14:15], -1, 0
	s_and_b64 s[2:3], s[14:15], s[2:3]
	s_subb_u32 s2, s16, s18
	s_lshl_b32 s14, s19, 6
	s_sub_i32 s15, s4, s14
	s_add_i32 s4, s15, -1
	v_lshlrev_b32_e32 v1, 3, v0
	v_mov_b32_e32 v6, s4
	v_cmp_gt_i32_e32 vcc, s15, v10
	s_mul_i32 s3, s14, s7
	v_and_b32_e32 v21, 56, v1
	v_cndmask_b32_e32 v1, v6, v10, vcc
	v_mul_lo_u32 v1, v1, s7
	v_or_b32_e32 v7, s3, v21
	s_lshl_b32 s16, s2, 6
	v_add_u32_e32 v2, v7, v1
	s_sub_i32 s17, s5, s16
	v_ashrrev_i32_e32 v3, 31, v2
	v_cmp_gt_i32_e32 vcc, s15, v8
	s_waitcnt lgkmcnt(0)
	v_lshl_add_u64 v[4:5], v[2:3], 1, s[12:13]
	s_add_i32 s4, s17, -1
	v_cndmask_b32_e32 v2, v6, v8, vcc
	v_mul_lo_u32 v2, v2, s7
	v_mov_b32_e32 v9, s4
	v_cmp_gt_i32_e32 vcc, s17, v10
	s_mul_i32 s2, s16, s8
	v_add_u32_e32 v6, v7, v2
	v_cndmask_b32_e32 v3, v9, v10, vcc
	v_ashrrev_i32_e32 v7, 31, v6
	v_mul_lo_u32 v3, v3, s8
	v_or_b32_e32 v11, s2, v21
	v_lshl_add_u64 v[6:7], v[6:7], 1, s[12:13]
	global_load_dwordx4 v[12:15], v[4:5], off
	global_load_dwordx4 v[24:27], v[6:7], off
	v_add_u32_e32 v4, v11, v3
	v_ashrrev_i32_e32 v5, 31, v4
	v_cmp_gt_i32_e32 vcc, s17, v8
	v_lshl_add_u64 v[6:7], v[4:5], 1, s[10:11]
	v_and_b32_e32 v5, 15, v0
	v_cndmask_b32_e32 v4, v9, v8, vcc
	v_mul_lo_u32 v4, v4, s8
	v_add_u32_e32 v8, v11, v4
	v_ashrrev_i32_e32 v9, 31, v8
	v_lshl_add_u64 v[8:9], v[8:9], 1, s[10:11]
	global_load_dwordx4 v[28:31], v[6:7], off
	global_load_dwordx4 v[32:35], v[8:9], off
	v_lshrrev_b32_e32 v6, 2, v0
	v_lshrrev_b32_e32 v0, 1, v0
	v_and_b32_e32 v18, 32, v0
	s_movk_i32 s4, 0x48
	v_lshlrev_b32_e32 v7, 3, v16
	v_and_or_b32 v17, v6, 32, v5
	v_or_b32_e32 v5, v18, v5
	v_mad_u32_u24 v19, v17, s4, v7
	v_mad_u32_u24 v20, v5, s4, v7
	s_ashr_i32 s4, s6, 31
	s_lshr_b32 s4, s4, 26
	s_add_i32 s4, s6, s4
	s_ashr_i32 s8, s4, 6
	s_andn2_b32 s4, s4, 63
	s_cmp_lg_u32 s6, s4
	s_cselect_b64 s[18:19], -1, 0
	s_cmp_lt_i32 s6, 0
	s_cselect_b64 s[6:7], -1, 0
	s_and_b64 s[6:7], s[6:7], s[18:19]
	s_subb_u32 s4, s8, 0
	v_mul_u32_u24_e32 v0, 0x48, v10
	s_add_i32 s4, s4, -1
	s_mov_b32 s5, 0
	v_add_lshl_u32 v22, v0, v21, 1
	s_cmp_lt_i32 s4, 1
	s_waitcnt vmcnt(3)
	ds_write_b128 v22, v[12:15]
	s_waitcnt vmcnt(2)
	ds_write_b128 v22, v[24:27] offset:4608
	s_waitcnt vmcnt(1)
	ds_write_b128 v22, v[28:31] offset:18432
	s_waitcnt vmcnt(0)
	ds_write_b128 v22, v[32:35] offset:23040
	s_waitcnt lgkmcnt(0)
	s_barrier
	s_cbranch_scc1 .LBB0_5
	v_lshlrev_b32_e32 v27, 1, v19
	v_lshlrev_b32_e32 v28, 1, v20
	v_add_u32_e32 v26, s3, v1
	v_add_u32_e32 v25, s3, v2
	v_add_u32_e32 v24, s2, v3
	s_cmp_eq_u32 s4, 1
	v_add_u32_e32 v23, s2, v4
	s_cbranch_scc1 .LBB0_6
	v_mov_b32_e32 v12, 0
	s_and_b32 s2, s4, 0x7ffffffe
	v_or_b32_e32 v29, 64, v21
	v_mov_b32_e32 v13, v12
	v_mov_b32_e32 v14, v12
	v_mov_b32_e32 v15, v12
	v_mov_b32_e32 v8, v12
	v_mov_b32_e32 v9, v12
	v_mov_b32_e32 v10, v12
	v_mov_b32_e32 v11, v12
	v_mov_b32_e32 v4, v12
	v_mov_b32_e32 v5, v12
	v_mov_b32_e32 v6, v12
	v_mov_b32_e32 v7, v12
	v_mov_b32_e32 v0, v12
	v_mov_b32_e32 v1, v12
	v_mov_b32_e32 v2, v12
	v_mov_b32_e32 v3, v12
	.p2align	5, , 4
.LBB0_3:
	ds_read_b128 v[38:41], v28 offset:18432
	v_lshl_or_b32 v31, s5, 6, v29
	ds_read_b128 v[42:45], v28 offset:20736
	ds_read_b128 v[46:49], v27
	ds_read_b128 v[50:53], v27 offset:64
	ds_read_b128 v[54:57], v27 offset:2304
	ds_read_b128 v[58:61], v27 offset:2368
	ds_read_b128 v[62:65], v28 offset:18496
	ds_read_b128 v[66:69], v28 offset:20800
	v_add_u32_e32 v30, v26, v31
	v_add_u32_e32 v32, v25, v31
	v_add_u32_e32 v34, v24, v31
	v_add_u32_e32 v36, v23, v31
	v_ashrrev_i32_e32 v31, 31, v30
	v_ashrrev_i32_e32 v33, 31, v32
	s_waitcnt lgkmcnt(5)
	v_mfma_f32_16x16x32_bf16 v[12:15], v[38:41], v[46:49], v[12:15]
	v_ashrrev_i32_e32 v35, 31, v34
	v_ashrrev_i32_e32 v37, 31, v36
	s_add_i32 s5, s5, 2
	s_waitcnt lgkmcnt(3)
	v_mfma_f32_16x16x32_bf16 v[4:7], v[38:41], v[54:57], v[4:7]
	v_lshl_add_u64 v[38:39], v[30:31], 1, s[12:13]
	v_lshl_add_u64 v[40:41], v[32:33], 1, s[12:13]
	v_add_u32_e32 v30, 64, v30
	v_mfma_f32_16x16x32_bf16 v[8:11], v[42:45], v[46:49], v[8:11]
	v_add_u32_e32 v32, 64, v32
	v_ashrrev_i32_e32 v31, 31, v30
	v_ashrrev_i32_e32 v33, 31, v32
	v_mfma_f32_16x16x32_bf16 v[0:3], v[42:45], v[54:57], v[0:3]
	v_lshl_add_u64 v[42:43], v[34:35], 1, s[10:11]
	global_load_dwordx4 v[46:49], v[38:39], off
	global_load_dwordx4 v[54:57], v[40:41], off
	global_load_dwordx4 v[70:73], v[42:43], off
	v_lshl_add_u64 v[44:45], v[36:37], 1, s[10:11]
	global_load_dwordx4 v[38:41], v[44:45], off
	s_waitcnt lgkmcnt(1)
	v_mfma_f32_16x16x32_bf16 v[12:15], v[62:65], v[50:53], v[12:15]
	v_add_u32_e32 v34, 64, v34
	v_ashrrev_i32_e32 v35, 31, v34
	v_lshl_add_u64 v[30:31], v[30:31], 1, s[12:13]
	s_waitcnt lgkmcnt(0)
	v_mfma_f32_16x16x32_bf16 v[8:11], v[66:69], v[50:53], v[8:11]
	v_add_u32_e32 v36, 64, v36
	v_lshl_add_u64 v[32:33], v[32:33], 1, s[12:13]
	v_lshl_add_u64 v[34:35], v[34:35], 1, s[10:11]
	v_mfma_f32_16x16x32_bf16 v[4:7], v[62:65], v[58:61], v[4:7]
	v_ashrrev_i32_e32 v37, 31, v36
	v_lshl_add_u64 v[36:37], v[36:37], 1, s[10:11]
	s_cmp_lg_u32 s5, s2
	v_mfma_f32_16x16x32_bf16 v[0:3], v[66:69], v[58:61], v[0:3]
	s_waitcnt vmcnt(3)
	ds_write_b128 v22, v[46:49] offset:9216
	s_waitcnt vmcnt(2)
	ds_write_b128 v22, v[54:57] offset:13824
	s_waitcnt vmcnt(1)
	ds_write_b128 v22, v[70:73] offset:27648
	s_waitcnt vmcnt(0)
	ds_write_b128 v22, v[38:41] offset:32256
	s_waitcnt lgkmcnt(0)
	s_barrier
	ds_read_b128 v[54:57], v28 offset:29952
	ds_read_b128 v[58:61], v28 offset:30016
	ds_read_b128 v[38:41], v28 offset:27648
	ds_read_b128 v[42:45], v27 offset:9216
	ds_read_b128 v[46:49], v27 offset:9280
	ds_read_b128 v[50:53], v28 offset:27712
	s_waitcnt lgkmcnt(2)
	v_mfma_f32_16x16x32_bf16 v[12:15], v[38:41], v[42:45], v[12:15]
	v_mfma_f32_16x16x32_bf16 v[8:11], v[54:57], v[42:45], v[8:11]
	ds_read_b128 v[42:45], v27 offset:11520
	ds_read_b128 v[62:65], v27 offset:11584
	s_waitcnt lgkmcnt(1)
	v_mfma_f32_16x16x32_bf16 v[4:7], v[38:41], v[42:45], v[4:7]
	v_mfma_f32_16x16x32_bf16 v[0:3], v[54:57], v[42:45], v[0:3]
	v_mfma_f32_16x16x32_bf16 v[12:15], v[50:53], v[46:49], v[12:15]
	v_mfma_f32_16x16x32_bf16 v[8:11], v[58:61], v[46:49], v[8:11]
	global_load_dwordx4 v[38:41], v[30:31], off
	global_load_dwordx4 v[42:45], v[32:33], off
	global_load_dwordx4 v[46:49], v[34:35], off
	s_nop 0
	global_load_dwordx4 v[30:33], v[36:37], off
	s_waitcnt lgkmcnt(0)
	v_mfma_f32_16x16x32_bf16 v[4:7], v[50:53], v[62:65], v[4:7]
	s_waitcnt vmcnt(3)
	ds_write_b128 v22, v[38:41]
	s_waitcnt vmcnt(2)
	ds_write_b128 v22, v[42:45] offset:4608
	s_waitcnt vmcnt(1)
	ds_write_b128 v22, v[46:49] offset:18432
	s_waitcnt vmcnt(0)
	ds_write_b128 v22, v[30:33] offset:23040
	v_mfma_f32_16x16x32_bf16 v[0:3], v[58:61], v[62:65], v[0:3]
	s_waitcnt lgkmcnt(0)
	s_barrier
	s_cbranch_scc1 .LBB0_3
	s_bitcmp1_b32 s4, 0
	s_cselect_b64 s[2:3], -1, 0
	s_and_b64 vcc, exec, s[2:3]
	s_cbranch_vccnz .LBB0_7
	s_branch .LBB0_8
.LBB0_5:
	v_mov_b32_e32 v0, 0
	v_mov_b32_e32 v1, v0
	v_mov_b32_e32 v2, v0
	v_mov_b32_e32 v3, v0
	v_mov_b32_e32 v4, v0
	v_mov_b32_e32 v5, v0
	v_mov_b32_e32 v6, v0
	v_mov_b32_e32 v7, v0
	v_mov_b32_e32 v8, v0
	v_mov_b32_e32 v9, v0
	v_mov_b32_e32 v10, v0
	v_mov_b32_e32 v11, v0
	v_mov_b32_e32 v12, v0
	v_mov_b32_e32 v13, v0
	v_mov_b32_e32 v14, v0
	v_mov_b32_e32 v15, v0
	s_branch .LBB0_8
.LBB0_6:
	v_mov_b32_e32 v3, 0
	v_mov_b32_e32 v2, v3
	v_mov_b32_e32 v1, v3
	v_mov_b32_e32 v0, v3
	v_mov_b32_e32 v7, v3
	v_mov_b32_e32 v6, v3
	v_mov_b32_e32 v5, v3
	v_mov_b32_e32 v4, v3
	v_mov_b32_e32 v11, v3
	v_mov_b32_e32 v10, v3
	v_mov_b32_e32 v9, v3
	v_mov_b32_e32 v8, v3
	v_mov_b32_e32 v15, v3
	v_mov_b32_e32 v14, v3
	v_mov_b32_e32 v13, v3
	v_mov_b32_e32 v12, v3
	s_cbranch_execz .LBB0_8
.LBB0_7:
	s_and_b32 s3, s5, 1
	s_lshl_b32 s2, s5, 6
	s_mul_i32 s5, s3, 0x2400
	v_add_u32_e32 v28, s5, v28
	ds_read_b128 v[32:35], v28 offset:18432
	v_add_u32_e32 v30, s5, v27
	ds_read_b128 v[36:39], v30
	ds_read_b128 v[40:43], v28 offset:20736
	s_add_i32 s2, s2, 64
	v_or_b32_e32 v21, s2, v21
	ds_read_b128 v[52:55], v30 offset:2304
	ds_read_b128 v[56:59], v28 offset:20800
	v_add_u32_e32 v26, v26, v21
	ds_read_b128 v[44:47], v30 offset:64
	ds_read_b128 v[48:51], v28 offset:18496
	v_ashrrev_i32_e32 v27, 31, v26
	s_waitcnt lgkmcnt(5)
	v_mfma_f32_16x16x32_bf16 v[12:15], v[32:35], v[36:39], v[12:15]
	v_add_u32_e32 v28, v25, v21
	v_lshl_add_u64 v[26:27], v[26:27], 1, s[12:13]
	v_ashrrev_i32_e32 v29, 31, v28
	s_waitcnt lgkmcnt(4)
	v_mfma_f32_16x16x32_bf16 v[8:11], v[40:43], v[36:39], v[8:11]
	v_add_u32_e32 v24, v24, v21
	ds_read_b128 v[36:39], v30 offset:2368
	v_lshl_add_u64 v[28:29], v[28:29], 1, s[12:13]
	s_waitcnt lgkmcnt(4)
	v_mfma_f32_16x16x32_bf16 v[4:7], v[32:35], v[52:55], v[4:7]
	global_load_dwordx4 v[30:33], v[26:27], off
	global_load_dwordx4 v[60:63], v[28:29], off
	v_ashrrev_i32_e32 v25, 31, v24
	v_add_u32_e32 v26, v23, v21
	v_lshl_add_u64 v[24:25], v[24:25], 1, s[10:11]
	v_ashrrev_i32_e32 v27, 31, v26
	v_mfma_f32_16x16x32_bf16 v[0:3], v[40:43], v[52:55], v[0:3]
	v_lshl_add_u64 v[26:27], v[26:27], 1, s[10:11]
	s_xor_b32 s2, s3, 1
	s_mulk_i32 s2, 0x2400
	s_waitcnt lgkmcnt(1)
	v_mfma_f32_16x16x32_bf16 v[12:15], v[48:51], v[44:47], v[12:15]
	v_add_u32_e32 v21, s2, v22
	v_mfma_f32_16x16x32_bf16 v[8:11], v[56:59], v[44:47], v[8:11]
	global_load_dwordx4 v[40:43], v[24:25], off
	global_load_dwordx4 v[44:47], v[26:27], off
	s_waitcnt vmcnt(3)
	ds_write_b128 v21, v[30:33]
	s_waitcnt vmcnt(2)
	ds_write_b128 v21, v[60:63] offset:4608
	s_waitcnt vmcnt(1)
	ds_write_b128 v21, v[40:43] offset:18432
	s_waitcnt vmcnt(0)
	ds_write_b128 v21, v[44:47] offset:23040
	s_waitcnt lgkmcnt(4)
	v_mfma_f32_16x16x32_bf16 v[4:7], v[48:51], v[36:39], v[4:7]
	s_waitcnt lgkmcnt(0)
	s_barrier
	v_mfma_f32_16x16x32_bf16 v[0:3], v[56:59], v[36:39], v[0:3]
.LBB0_8:
	s_lshr_b32 s2, s4, 31
	s_add_i32 s2, s4, s2
	s_and_b32 s2, s2, 0x3ffffe
	s_sub_i32 s2, s4, s2
	s_mulk_i32 s2, 0x2400
	v_lshl_add_u32 v20, v20, 1, s2
	ds_read_b128 v[22:25], v20 offset:18432
	v_lshl_add_u32 v19, v19, 1, s2
	ds_read_b128 v[38:41], v20 offset:20736
	ds_read_b128 v[42:45], v20 offset:20800
	ds_read_b128 v[26:29], v19
	ds_read_b128 v[30:33], v19 offset:64
	ds_read_b128 v[34:37], v20 offset:18496
	s_waitcnt lgkmcnt(2)
	v_mfma_f32_16x16x32_bf16 v[8:11], v[38:41], v[26:29], v[8:11]
	s_load_dword s6, s[0:1], 0x84
	s_load_dwordx2 s[4:5], s[0:1], 0x30
	v_cmp_gt_i32_e64 s[2:3], s15, v17
	s_waitcnt lgkmcnt(0)
	s_mov_b32 s7, s6
	v_mfma_f32_16x16x32_bf16 v[12:15], v[22:25], v[26:29], v[12:15]
	ds_read_b128 v[26:29], v19 offset:2304
	ds_read_b128 v[46:49], v19 offset:2368
	v_lshl_or_b32 v19, v16, 2, v18
	v_cmp_gt_i32_e32 vcc, s17, v19
	s_waitcnt lgkmcnt(1)
	v_mfma_f32_16x16x32_bf16 v[4:7], v[22:25], v[26:29], v[4:7]
	s_and_b64 s[10:11], s[2:3], vcc
	v_or_b32_e32 v18, s14, v17
	v_or_b32_e32 v16, s16, v19
	v_mfma_f32_16x16x32_bf16 v[0:3], v[38:41], v[26:29], v[0:3]
	v_mfma_f32_16x16x32_bf16 v[12:15], v[34:37], v[30:33], v[12:15]
	v_mfma_f32_16x16x32_bf16 v[8:11], v[42:45], v[30:33], v[8:11]
	s_waitcnt lgkmcnt(0)
	v_mfma_f32_16x16x32_bf16 v[4:7], v[34:37], v[46:49], v[4:7]
	v_mfma_f32_16x16x32_bf16 v[0:3], v[42:45], v[46:49], v[0:3]
	s_and_saveexec_b64 s[0:1], s[10:11]
	s_cbranch_execz .LBB0_10
	s_mov_b32 s10, s6
	s_mov_b32 s11, s6
	v_pk_mul_f32 v[14:15], s[10:11], v[14:15]
	v_pk_mul_f32 v[12:13], s[6:7], v[12:13]
	v_cvt_pk_bf16_f32 v15, v14, v15
	v_cvt_pk_bf16_f32 v14, v12, v13
	v_mad_u64_u32 v[12:13], s[10:11], v18, s9, v[16:17]
	v_ashrrev_i32_e32 v13, 31, v12
	v_lshl_add_u64 v[12:13], v[12:13], 1, s[4:5]
	global_store_dwordx2 v[12:13], v[14:15], off
.LBB0_10:
	s_or_b64 exec, exec, s[0:1]
	s_nop 0
	v_or_b32_e32 v12, 16, v19
	v_cmp_gt_i32_e64 s[0:1], s17, v12
	s_and_b64 s[10:11], s[2:3], s[0:1]
	v_or_b32_e32 v12, s16, v12
	s_and_saveexec_b64 s[2:3], s[10:11]
	s_cbranch_execz .LBB0_12
	s_mov_b32 s10, s6
	s_mov_b32 s11, s6
	v_pk_mul_f32 v[10:11], s[10:11], v[10:11]
	v_pk_mul_f32 v[8:9], s[6:7], v[8:9]
	v_cvt_pk_bf16_f32 v11, v10, v11
	v_cvt_pk_bf16_f32 v10, v8, v9
	v_mad_u64_u32 v[8:9], s[10:11], v18, s9, v[12:13]
	v_ashrrev_i32_e32 v9, 31, v8
	v_lshl_add_u64 v[8:9], v[8:9], 1, s[4:5]
	global_store_dwordx2 v[8:9], v[10:11], off
.LBB0_12:
	s_or_b64 exec, exec, s[2:3]
	v_or_b32_e32 v8, 16, v17
	v_cmp_gt_i32_e64 s[2:3], s15, v8
	s_and_b64 s[12:13], s[2:3], vcc
	v_or_b32_e32 v8, s14, v8
	s_and_saveexec_b64 s[10:11], s[12:13]
	s_cbranch_execz .LBB0_14
	s_mov_b32 s12, s6
	s_mov_b32 s13, s6
	v_pk_mul_f32 v[6:7], s[12:13], v[6:7]
	v_pk_mul_f32 v[4:5], s[6:7], v[4:5]
	v_cvt_pk_bf16_f32 v7, v6, v7
	v_cvt_pk_bf16_f32 v6, v4, v5
	v_mad_u64_u32 v[4:5], s[12:13], v8, s9, v[16:17]
	v_ashrrev_i32_e32 v5, 31, v4
	v_lshl_add_u64 v[4:5], v[4:5], 1, s[4:5]
	global_store_dwordx2 v[4:5], v[6:7], off
.LBB0_14:
	s_or_b64 exec, exec, s[10:11]
	s_and_b64 s[0:1], s[2:3], s[0:1]
	s_and_saveexec_b64 s[2:3], s[0:1]
	s_cbranch_execz .LBB0_16
	s_mov_b32 s0, s6
	s_mov_b32 s1, s6
	v_pk_mul_f32 v[2:3], s[0:1], v[2:3]
	v_pk_mul_f32 v[0:1], s[6:7], v[0:1]
	v_cvt_pk_bf16_f32 v3, v2, v3
	v_cvt_pk_bf16_f32 v2, v0, v1
	v_mad_u64_u32 v[0:1], s[0:1], v8, s9, v[12:13]
	v_ashrrev_i32_e32 v1, 31, v0
	v_lshl_add_u64 v[0:1], v[0:1], 1, s[4:5]
	global_store_dwordx2 v[0:1], v[2:3], off
.LBB0_16:
	s_endpgm
.Lfunc_end0:
	.size	gemm_kernel_0, .Lfunc_end0-gemm_kernel_0
	.section	.rodata,"a",@progbits
	.p2align	6, 0x0
	.amdhsa_kernel gemm_kernel_0
		.amdhsa_group_segment_fixed_size 36864
		.amdhsa_private_segment_fixed_size 0
		.amdhsa_kernarg_size 140
		.amdhsa_user_sgpr_count 2
		.amdhsa_user_sgpr_dispatch_ptr 0
		.amdhsa_user_sgpr_queue_ptr 0
		.amdhsa_user_sgpr_kernarg_segment_ptr 1
		.amdhsa_user_sgpr_dispatch_id 0
		.amdhsa_user_sgpr_kernarg_preload_length 0
		.amdhsa_user_sgpr_kernarg_preload_offset 0
		.amdhsa_user_sgpr_private_segment_size 0
		.amdhsa_uses_dynamic_stack 0
		.amdhsa_enable_private_segment 0
		.amdhsa_system_sgpr_workgroup_id_x 1
		.amdhsa_system_sgpr_workgroup_id_y 0
		.amdhsa_system_sgpr_workgroup_id_z 0
		.amdhsa_system_sgpr_workgroup_info 0
		.amdhsa_system_vgpr_workitem_id 0
		.amdhsa_next_free_vgpr 97
		.amdhsa_next_free_sgpr 96
		.amdhsa_accum_offset 76
		.amdhsa_reserve_vcc 1
		.amdhsa_float_round_mode_32 0
		.amdhsa_float_round_mode_16_64 0
		.amdhsa_float_denorm_mode_32 3
		.amdhsa_float_denorm_mode_16_64 3
		.amdhsa_dx10_clamp 1
		.amdhsa_ieee_mode 1
		.amdhsa_fp16_overflow 0
		.amdhsa_tg_split 0
		.amdhsa_exception_fp_ieee_invalid_op 0
		.amdhsa_exception_fp_denorm_src 0
		.amdhsa_exception_fp_ieee_div_zero 0
		.amdhsa_exception_fp_ieee_overflow 0
		.amdhsa_exception_fp_ieee_underflow 0
		.amdhsa_exception_fp_ieee_inexact 0
		.amdhsa_exception_int_div_zero 0
	.end_amdhsa_kernel
	.text

	.set .Lgemm_kernel_0.num_vgpr, 74
	.set .Lgemm_kernel_0.num_agpr, 0
	.set .Lgemm_kernel_0.numbered_sgpr, 22
	.set .Lgemm_kernel_0.num_named_barrier, 0
	.set .Lgemm_kernel_0.private_seg_size, 0
	.set .Lgemm_kernel_0.uses_vcc, 1
	.set .Lgemm_kernel_0.uses_flat_scratch, 0
	.set .Lgemm_kernel_0.has_dyn_sized_stack, 0
	.set .Lgemm_kernel_0.has_recursion, 0
	.set .Lgemm_kernel_0.has_indirect_call, 0
	.p2alignl 6, 3212836864
	.fill 256, 4, 3212836864
	.section	.AMDGPU.gpr_maximums,"",@progbits
	.set amdgpu.max_num_vgpr, 0
	.set amdgpu.max_num_agpr, 0
	.set amdgpu.max_num_sgpr, 0
	.set amdgpu.max_num_named_barrier, 0
	.text
	.section	".note.GNU-stack","",@progbits
	.amdgpu_metadata
---
amdhsa.kernels:
  - .agpr_count:     0
    .args:
      - .address_space:  global
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
      - .offset:         8
        .size:           16
        .value_kind:     by_value
      - .address_space:  global
        .offset:         24
        .size:           8
        .value_kind:     global_buffer
      - .offset:         32
        .size:           16
        .value_kind:     by_value
      - .address_space:  global
        .offset:         48
        .size:           8
        .value_kind:     global_buffer
      - .offset:         56
        .size:           16
        .value_kind:     by_value
      - .address_space:  global
        .offset:         72
        .size:           8
        .value_kind:     global_buffer
      - .offset:         80
        .size:           16
        .value_kind:     by_value
      - .offset:         96
        .size:           4
        .value_kind:     by_value
      - .offset:         100
        .size:           4
        .value_kind:     by_value
      - .offset:         104
        .size:           4
        .value_kind:     by_value
      - .offset:         108
        .size:           4
        .value_kind:     by_value
      - .offset:         112
        .size:           4
        .value_kind:     by_value
      - .offset:         116
        .size:           4
        .value_kind:     by_value
      - .offset:         120
        .size:           4
        .value_kind:     by_value
      - .offset:         124
        .size:           4
        .value_kind:     by_value
      - .offset:         128
        .size:           4
        .value_kind:     by_value
      - .offset:         132
        .size:           4
        .value_kind:     by_value
      - .offset:         136
        .size:           4
        .value_kind:     by_value
    .group_segment_fixed_size: 36864
    .kernarg_segment_align: 8
    .kernarg_segment_size: 140
    .max_flat_workgroup_size: 256
    .name:           gemm_kernel_0
    .private_segment_fixed_size: 0
    .reqd_workgroup_size:
      - 256
      - 1
      - 1
    .sgpr_count:     28
    .sgpr_spill_count: 0
    .symbol:         gemm_kernel_0.kd
    .uniform_work_group_size: 1
    .uses_dynamic_stack: false
    .vgpr_count:     74
    .vgpr_spill_count: 0
    .wavefront_size: 64
amdhsa.target:   amdgcn-amd-amdhsa-unknown-gfx950
amdhsa.version:
  - 1
  - 2
...

	.end_amdgpu_metadata
