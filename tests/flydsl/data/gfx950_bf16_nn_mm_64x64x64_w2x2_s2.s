	.amdgcn_target "amdgcn-amd-amdhsa-unknown-gfx950"
	.amdhsa_code_object_version 6
	.text
	.globl	gemm_kernel_0
	.p2align	8
	.type	gemm_kernel_0,@function
gemm_kernel_0:
	s_load_dwordx4 s[4:7], s[0:1], 0x60
	v_lshrrev_b32_e32 v2, 3, v0
	v_and_b32_e32 v10, 7, v0
	v_bfe_u32 v25, v0, 4, 2
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
	s_load_dwordx2 s[10:11], s[0:1], 0x0
	s_load_dwordx2 s[12:13], s[0:1], 0x18
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
	s_sub_i32 s16, s4, s14
	s_add_i32 s3, s16, -1
	s_lshl_b32 s15, s2, 6
	s_mul_i32 s2, s14, s7
	v_lshlrev_b32_e32 v1, 3, v10
	v_mov_b32_e32 v7, s3
	v_cmp_gt_i32_e32 vcc, s16, v2
	v_or_b32_e32 v6, s2, v1
	s_sub_i32 s17, s5, s15
	v_cndmask_b32_e32 v3, v7, v2, vcc
	v_mad_u64_u32 v[4:5], s[2:3], v3, s7, v[6:7]
	v_ashrrev_i32_e32 v5, 31, v4
	s_waitcnt lgkmcnt(0)
	v_lshl_add_u64 v[8:9], v[4:5], 1, s[10:11]
	v_or_b32_e32 v4, 32, v2
	v_cmp_gt_i32_e32 vcc, s16, v4
	s_nop 1
	v_cndmask_b32_e32 v4, v7, v4, vcc
	v_mad_u64_u32 v[6:7], s[2:3], v4, s7, v[6:7]
	v_ashrrev_i32_e32 v7, 31, v6
	v_lshl_add_u64 v[6:7], v[6:7], 1, s[10:11]
	s_add_i32 s2, s17, -8
	global_load_dwordx4 v[12:15], v[8:9], off
	global_load_dwordx4 v[16:19], v[6:7], off
	v_min_i32_e32 v5, s2, v1
	v_mul_lo_u32 v6, s8, v2
	v_add3_u32 v6, v5, s15, v6
	v_ashrrev_i32_e32 v7, 31, v6
	v_lshl_add_u64 v[8:9], v[6:7], 1, s[12:13]
	global_load_dwordx4 v[20:23], v[8:9], off
	v_lshl_add_u32 v6, s8, 5, v6
	v_ashrrev_i32_e32 v7, 31, v6
	v_lshl_add_u64 v[6:7], v[6:7], 1, s[12:13]
	global_load_dwordx4 v[32:35], v[6:7], off
	v_and_b32_e32 v6, 15, v0
	v_lshrrev_b32_e32 v7, 2, v0
	v_lshrrev_b32_e32 v0, 1, v0
	v_and_b32_e32 v26, 32, v0
	s_movk_i32 s2, 0x48
	v_lshlrev_b32_e32 v8, 3, v25
	v_and_or_b32 v24, v7, 32, v6
	v_or_b32_e32 v6, v26, v6
	v_mad_u32_u24 v27, v24, s2, v8
	v_mad_u32_u24 v29, v2, s2, v1
	v_mad_u32_u24 v28, v6, s2, v8
	s_ashr_i32 s2, s6, 31
	s_lshr_b32 s2, s2, 26
	s_add_i32 s2, s6, s2
	s_ashr_i32 s20, s2, 6
	s_andn2_b32 s2, s2, 63
	s_cmp_lg_u32 s6, s2
	s_cselect_b64 s[4:5], -1, 0
	s_cmp_lt_i32 s6, 0
	s_cselect_b64 s[18:19], -1, 0
	s_and_b64 s[4:5], s[18:19], s[4:5]
	s_subb_u32 s2, s20, 0
	v_mul_u32_u24_e32 v0, 0x240, v10
	s_add_i32 s2, s2, -1
	s_mov_b32 s3, 0
	v_or_b32_e32 v30, v0, v2
	v_lshlrev_b32_e32 v0, 1, v29
	s_cmp_lt_i32 s2, 1
	v_lshlrev_b32_e32 v6, 1, v30
	s_waitcnt vmcnt(3)
	ds_write_b128 v0, v[12:15]
	s_waitcnt vmcnt(2)
	ds_write_b128 v0, v[16:19] offset:4608
	s_waitcnt vmcnt(1)
	ds_write_b16 v6, v20 offset:18432
	ds_write_b16_d16_hi v6, v20 offset:18576
	ds_write_b16 v6, v21 offset:18720
	ds_write_b16_d16_hi v6, v21 offset:18864
	ds_write_b16 v6, v22 offset:19008
	ds_write_b16_d16_hi v6, v22 offset:19152
	ds_write_b16 v6, v23 offset:19296
	ds_write_b16_d16_hi v6, v23 offset:19440
	s_waitcnt vmcnt(0)
	ds_write_b16 v6, v32 offset:18496
	ds_write_b16_d16_hi v6, v32 offset:18640
	ds_write_b16 v6, v33 offset:18784
	ds_write_b16_d16_hi v6, v33 offset:18928
	ds_write_b16 v6, v34 offset:19072
	ds_write_b16_d16_hi v6, v34 offset:19216
	ds_write_b16 v6, v35 offset:19360
	ds_write_b16_d16_hi v6, v35 offset:19504
	s_waitcnt lgkmcnt(0)
	s_barrier
	s_cbranch_scc1 .LBB0_3
	v_or_b32_e32 v0, 0x60, v2
	v_mul_lo_u32 v0, s8, v0
	v_add3_u32 v16, v5, v0, s15
	v_or_b32_e32 v0, 64, v2
	v_mul_lo_u32 v0, s8, v0
	v_add3_u32 v18, v5, v0, s15
	v_add_u32_e32 v0, s14, v4
	v_mul_lo_u32 v0, s7, v0
	v_add3_u32 v20, v0, v1, 64
	v_add_u32_e32 v0, s14, v3
	v_mul_lo_u32 v0, s7, v0
	v_add3_u32 v22, v0, v1, 64
	v_mov_b32_e32 v0, 0
	v_lshlrev_b32_e32 v31, 1, v27
	v_lshlrev_b32_e32 v32, 1, v28
	s_lshl_b32 s4, s8, 6
	v_mov_b32_e32 v1, v0
	v_mov_b32_e32 v2, v0
	v_mov_b32_e32 v3, v0
	v_mov_b32_e32 v4, v0
	v_mov_b32_e32 v5, v0
	v_mov_b32_e32 v6, v0
	v_mov_b32_e32 v7, v0
	v_mov_b32_e32 v12, v0
	v_mov_b32_e32 v13, v0
	v_mov_b32_e32 v14, v0
	v_mov_b32_e32 v15, v0
	v_mov_b32_e32 v8, v0
	v_mov_b32_e32 v9, v0
	v_mov_b32_e32 v10, v0
	v_mov_b32_e32 v11, v0
.LBB0_2:
	s_and_b32 s5, s3, 1
	v_ashrrev_i32_e32 v19, 31, v18
	s_mul_i32 s6, s5, 0x2400
	v_ashrrev_i32_e32 v23, 31, v22
	v_ashrrev_i32_e32 v21, 31, v20
	v_lshl_add_u64 v[38:39], v[18:19], 1, s[12:13]
	v_add_u32_e32 v19, s6, v32
	v_ashrrev_i32_e32 v17, 31, v16
	v_lshl_add_u64 v[34:35], v[22:23], 1, s[10:11]
	v_lshl_add_u64 v[36:37], v[20:21], 1, s[10:11]
	ds_read_b128 v[62:65], v19 offset:20736
	ds_read_b128 v[66:69], v19 offset:20800
	v_lshl_add_u64 v[40:41], v[16:17], 1, s[12:13]
	global_load_dwordx4 v[42:45], v[34:35], off
	global_load_dwordx4 v[46:49], v[36:37], off
	v_add_u32_e32 v17, s6, v31
	ds_read_b128 v[34:37], v19 offset:18432
	ds_read_b128 v[50:53], v17
	ds_read_b128 v[54:57], v17 offset:64
	ds_read_b128 v[58:61], v19 offset:18496
	s_waitcnt lgkmcnt(2)
	v_mfma_f32_16x16x32_bf16 v[0:3], v[34:37], v[50:53], v[0:3]
	s_xor_b32 s5, s5, 1
	s_add_i32 s6, s3, 1
	s_mulk_i32 s5, 0x2400
	v_mfma_f32_16x16x32_bf16 v[4:7], v[62:65], v[50:53], v[4:7]
	ds_read_b128 v[50:53], v17 offset:2304
	ds_read_b128 v[70:73], v17 offset:2368
	v_add_u32_e32 v16, s4, v16
	v_add_u32_e32 v18, s4, v18
	s_waitcnt lgkmcnt(1)
	v_mfma_f32_16x16x32_bf16 v[12:15], v[34:37], v[50:53], v[12:15]
	global_load_dwordx4 v[34:37], v[38:39], off
	v_add_u32_e32 v20, 64, v20
	global_load_dwordx4 v[38:41], v[40:41], off
	v_mfma_f32_16x16x32_bf16 v[8:11], v[62:65], v[50:53], v[8:11]
	v_add_u32_e32 v22, 64, v22
	s_mov_b32 s3, s6
	s_cmp_lg_u32 s2, s6
	v_mfma_f32_16x16x32_bf16 v[0:3], v[58:61], v[54:57], v[0:3]
	v_lshl_add_u32 v17, v29, 1, s5
	v_lshl_add_u32 v19, v30, 1, s5
	s_waitcnt vmcnt(3)
	ds_write_b128 v17, v[42:45]
	s_waitcnt vmcnt(2)
	ds_write_b128 v17, v[46:49] offset:4608
	s_waitcnt vmcnt(1)
	ds_write_b16 v19, v34 offset:18432
	ds_write_b16_d16_hi v19, v34 offset:18576
	ds_write_b16 v19, v35 offset:18720
	ds_write_b16_d16_hi v19, v35 offset:18864
	ds_write_b16 v19, v36 offset:19008
	ds_write_b16_d16_hi v19, v36 offset:19152
	ds_write_b16 v19, v37 offset:19296
	ds_write_b16_d16_hi v19, v37 offset:19440
	s_waitcnt vmcnt(0)
	ds_write_b16 v19, v38 offset:18496
	ds_write_b16_d16_hi v19, v38 offset:18640
	ds_write_b16 v19, v39 offset:18784
	ds_write_b16_d16_hi v19, v39 offset:18928
	ds_write_b16 v19, v40 offset:19072
	ds_write_b16_d16_hi v19, v40 offset:19216
	ds_write_b16 v19, v41 offset:19360
	ds_write_b16_d16_hi v19, v41 offset:19504
	v_mfma_f32_16x16x32_bf16 v[4:7], v[66:69], v[54:57], v[4:7]
	s_waitcnt lgkmcnt(0)
	s_barrier
	v_mfma_f32_16x16x32_bf16 v[12:15], v[58:61], v[70:73], v[12:15]
	v_mfma_f32_16x16x32_bf16 v[8:11], v[66:69], v[70:73], v[8:11]
	s_cbranch_scc1 .LBB0_2
	s_branch .LBB0_4
.LBB0_3:
	v_mov_b32_e32 v3, 0
	v_mov_b32_e32 v2, v3
	v_mov_b32_e32 v1, v3
	v_mov_b32_e32 v0, v3
	v_mov_b32_e32 v7, v3
	v_mov_b32_e32 v6, v3
	v_mov_b32_e32 v5, v3
	v_mov_b32_e32 v4, v3
	v_mov_b32_e32 v15, v3
	v_mov_b32_e32 v14, v3
	v_mov_b32_e32 v13, v3
	v_mov_b32_e32 v12, v3
	v_mov_b32_e32 v11, v3
	v_mov_b32_e32 v10, v3
	v_mov_b32_e32 v9, v3
	v_mov_b32_e32 v8, v3
.LBB0_4:
	s_lshr_b32 s3, s2, 31
	s_add_i32 s3, s2, s3
	s_and_b32 s3, s3, 0x3ffffe
	s_sub_i32 s2, s2, s3
	s_mulk_i32 s2, 0x2400
	v_lshl_add_u32 v16, v28, 1, s2
	ds_read_b128 v[18:21], v16 offset:18432
	v_lshl_add_u32 v17, v27, 1, s2
	ds_read_b128 v[40:43], v16 offset:20736
	ds_read_b128 v[44:47], v16 offset:20800
	ds_read_b128 v[28:31], v17
	ds_read_b128 v[32:35], v17 offset:64
	ds_read_b128 v[36:39], v16 offset:18496
	s_waitcnt lgkmcnt(2)
	v_mfma_f32_16x16x32_bf16 v[4:7], v[40:43], v[28:31], v[4:7]
	s_load_dword s6, s[0:1], 0x84
	s_load_dwordx2 s[4:5], s[0:1], 0x30
	v_lshl_or_b32 v16, v25, 2, v26
	v_cmp_gt_i32_e64 s[2:3], s16, v24
	v_mfma_f32_16x16x32_bf16 v[0:3], v[18:21], v[28:31], v[0:3]
	ds_read_b128 v[28:31], v17 offset:2304
	ds_read_b128 v[48:51], v17 offset:2368
	v_cmp_gt_i32_e32 vcc, s17, v16
	s_waitcnt lgkmcnt(0)
	s_mov_b32 s7, s6
	v_mfma_f32_16x16x32_bf16 v[18:21], v[18:21], v[28:31], v[12:15]
	s_and_b64 s[10:11], s[2:3], vcc
	v_mfma_f32_16x16x32_bf16 v[28:31], v[40:43], v[28:31], v[8:11]
	v_mfma_f32_16x16x32_bf16 v[12:15], v[36:39], v[32:35], v[0:3]
	v_mfma_f32_16x16x32_bf16 v[8:11], v[44:47], v[32:35], v[4:7]
	v_mfma_f32_16x16x32_bf16 v[4:7], v[36:39], v[48:51], v[18:21]
	v_mfma_f32_16x16x32_bf16 v[0:3], v[44:47], v[48:51], v[28:31]
	s_and_saveexec_b64 s[0:1], s[10:11]
	s_cbranch_execz .LBB0_6
	s_mov_b32 s10, s6
	s_mov_b32 s11, s6
	s_nop 0
	v_pk_mul_f32 v[14:15], s[10:11], v[14:15]
	v_pk_mul_f32 v[12:13], s[6:7], v[12:13]
	v_cvt_pk_bf16_f32 v15, v14, v15
	v_cvt_pk_bf16_f32 v14, v12, v13
	v_or_b32_e32 v13, s14, v24
	v_or_b32_e32 v12, s15, v16
	v_mad_u64_u32 v[12:13], s[10:11], v13, s9, v[12:13]
	v_ashrrev_i32_e32 v13, 31, v12
	v_lshl_add_u64 v[12:13], v[12:13], 1, s[4:5]
	global_store_dwordx2 v[12:13], v[14:15], off
.LBB0_6:
	s_or_b64 exec, exec, s[0:1]
	s_nop 1
	v_or_b32_e32 v12, 16, v16
	v_cmp_gt_i32_e64 s[0:1], s17, v12
	s_and_b64 s[10:11], s[2:3], s[0:1]
	s_and_saveexec_b64 s[2:3], s[10:11]
	s_cbranch_execz .LBB0_8
	s_mov_b32 s10, s6
	s_mov_b32 s11, s6
	v_pk_mul_f32 v[10:11], s[10:11], v[10:11]
	v_pk_mul_f32 v[8:9], s[6:7], v[8:9]
	v_cvt_pk_bf16_f32 v11, v10, v11
	v_cvt_pk_bf16_f32 v10, v8, v9
	v_or_b32_e32 v9, s14, v24
	v_or_b32_e32 v8, s15, v12
	v_mad_u64_u32 v[8:9], s[10:11], v9, s9, v[8:9]
	v_ashrrev_i32_e32 v9, 31, v8
	v_lshl_add_u64 v[8:9], v[8:9], 1, s[4:5]
	global_store_dwordx2 v[8:9], v[10:11], off
.LBB0_8:
	s_or_b64 exec, exec, s[2:3]
	v_or_b32_e32 v8, 16, v24
	v_cmp_gt_i32_e64 s[2:3], s16, v8
	s_and_b64 s[12:13], s[2:3], vcc
	s_and_saveexec_b64 s[10:11], s[12:13]
	s_cbranch_execz .LBB0_10
	s_mov_b32 s12, s6
	s_mov_b32 s13, s6
	v_pk_mul_f32 v[6:7], s[12:13], v[6:7]
	v_pk_mul_f32 v[4:5], s[6:7], v[4:5]
	v_cvt_pk_bf16_f32 v7, v6, v7
	v_cvt_pk_bf16_f32 v6, v4, v5
	v_or_b32_e32 v5, s14, v8
	v_or_b32_e32 v4, s15, v16
	v_mad_u64_u32 v[4:5], s[12:13], v5, s9, v[4:5]
	v_ashrrev_i32_e32 v5, 31, v4
	v_lshl_add_u64 v[4:5], v[4:5], 1, s[4:5]
	global_store_dwordx2 v[4:5], v[6:7], off
.LBB0_10:
	s_or_b64 exec, exec, s[10:11]
	s_and_b64 s[0:1], s[2:3], s[0:1]
	s_and_saveexec_b64 s[2:3], s[0:1]
	s_cbranch_execz .LBB0_12
	s_mov_b32 s0, s6
	s_mov_b32 s1, s6
	v_pk_mul_f32 v[2:3], s[0:1], v[2:3]
	v_pk_mul_f32 v[0:1], s[6:7], v[0:1]
	v_cvt_pk_bf16_f32 v3, v2, v3
	v_cvt_pk_bf16_f32 v2, v0, v1
	v_or_b32_e32 v1, s14, v8
	v_or_b32_e32 v0, s15, v12
	v_mad_u64_u32 v[0:1], s[0:1], v1, s9, v[0:1]
	v_ashrrev_i32_e32 v1, 31, v0
	v_lshl_add_u64 v[0:1], v[0:1], 1, s[4:5]
	global_store_dwordx2 v[0:1], v[2:3], off
.LBB0_12:
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
