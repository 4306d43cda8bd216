/* A stand-in for ROCm's libamdhip64.so.7, for tests on hosts without an AMD GPU.
 *
 * It exports the HIP functions FlyDSL's runtime (libfly_jit_runtime.so) imports, with
 * their symbol version (hip_4.2, see fake_hip.map), over host memory: a "device pointer"
 * is a host pointer, hipMalloc is an aligned malloc, copies and sets are memcpy/memset.
 * Streams and events are host objects; every stream is in order and always idle.
 *
 * Launches (hipModuleLaunchKernel) are handled in one of two modes:
 *   FAKEHIP_RECORD   keep a record of the launch: the code object, kernel name, grid,
 *                    block, dynamic LDS, stream, device and the kernarg bytes;
 *   FAKEHIP_CALLBACK hand the same record to a function the test registered (the ISA
 *                    emulator runs the kernel on the host memory its pointers name);
 *                    a nonzero return fails the launch.
 * The kernarg bytes are laid out from the argument table (offset and size of each
 * argument, and the segment size) registered per kernel by the test harness with
 * fakehip_set_kernel_args(), as HIP lays them out from the code object's metadata. A
 * launch through `extra` (HIP_LAUNCH_PARAM_BUFFER_POINTER) copies the caller's buffer.
 *
 * Errors can be injected: the next N module loads, launches or allocations fail
 * (hipErrorInvalidImage / hipErrorLaunchFailure / hipErrorOutOfMemory), and an
 * allocation larger than a set limit fails. Every failure is kept as the calling
 * thread's last error, as HIP keeps it (hipGetLastError returns and clears it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

typedef int hipError_t;
enum {
    hipSuccess = 0,
    hipErrorInvalidValue = 1,
    hipErrorOutOfMemory = 2,
    hipErrorInvalidDevice = 101,
    hipErrorInvalidImage = 200,
    hipErrorInvalidResourceHandle = 400,
    hipErrorNotFound = 500,
    hipErrorLaunchFailure = 719,
};

#define MAX_DEVICES 8
#define MAX_KERNARG 4096
#define MAX_ARGS 128
#define MAX_RECORDS 4096

typedef struct fake_module {
    const void *image;  /* a copy of the code object */
    uint64_t size;
    int device;         /* the device current when it was loaded */
    int id;
    int unloaded;
    uint64_t hash;      /* FNV-1a of the code object, computed once at load */
} fake_module;

typedef struct fake_kernel_args {
    char name[256];
    uint64_t image_hash;
    int count;
    uint32_t offsets[MAX_ARGS];
    uint32_t sizes[MAX_ARGS];
    uint32_t segment_size;
    struct fake_kernel_args *next;
} fake_kernel_args;

typedef struct fake_function {
    fake_module *module;
    char name[256];
    fake_kernel_args *args;
} fake_function;

typedef struct fake_stream { int device; int id; } fake_stream;
typedef struct fake_event { struct timespec when; } fake_event;

/* One launch, as the record mode keeps it and the callback receives it. */
typedef struct fakehip_launch {
    int module_id;
    int module_device;        /* the device the module was loaded on */
    int device;               /* the device current at the launch */
    const void *image;
    uint64_t image_size;
    char kernel[256];
    uint32_t grid[3];
    uint32_t block[3];
    uint32_t shared_bytes;
    void *stream;
    uint32_t kernarg_size;    /* 0 when no argument table was registered */
    uint8_t kernarg[MAX_KERNARG];
} fakehip_launch;

typedef int (*fakehip_callback)(const fakehip_launch *launch);
/* Called by hipModuleLoadData with the code object (the harness registers its kernels'
 * argument tables from the code object's metadata); a nonzero return fails the load. */
typedef int (*fakehip_load_callback)(const void *image, uint64_t size);

enum { FAKEHIP_RECORD = 0, FAKEHIP_CALLBACK = 1 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int current_device = 0;
static __thread hipError_t last_error = hipSuccess;
static int device_count = 1;
static int mode = FAKEHIP_RECORD;
static fakehip_callback callback = NULL;
static fakehip_load_callback load_callback = NULL;
static fakehip_launch *records = NULL;
static uint64_t record_count = 0;   /* launches since the last reset (may exceed kept) */
static uint64_t api_calls = 0;
static int fail_loads = 0, fail_launches = 0, fail_mallocs = 0;
static uint64_t malloc_limit = UINT64_MAX;
static uint64_t allocated = 0;
static int next_module_id = 1;
static fake_kernel_args *kernel_args = NULL;
/* Stream capture (a CUDA/HIP graph being recorded), as a test sets it: every stream
 * reports it; what happens while it is on is counted (none of it may: a module load,
 * an allocation outside torch's allocator, a synchronization). */
static int capturing = 0;
static uint64_t loads = 0, unloads = 0, during_capture = 0;

static hipError_t fail(hipError_t err) {
    last_error = err;
    return err;
}

static uint64_t fnv1a(const void *data, uint64_t size) {
    const uint8_t *p = data;
    uint64_t h = 1469598103934665603ULL;
    for (uint64_t i = 0; i < size; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

/* The size of an ELF64 image: its section header table ends it (AMDGPU code objects
 * put it last); else the end of its last section. */
static uint64_t elf_size(const uint8_t *image) {
    if (memcmp(image, "\x7f" "ELF", 4) != 0 || image[4] != 2) return 0;
    uint64_t shoff; uint16_t shentsize, shnum;
    memcpy(&shoff, image + 0x28, 8);
    memcpy(&shentsize, image + 0x3a, 2);
    memcpy(&shnum, image + 0x3c, 2);
    uint64_t end = shoff + (uint64_t)shentsize * shnum;
    for (uint16_t i = 0; i < shnum; i++) {
        const uint8_t *sh = image + shoff + (uint64_t)i * shentsize;
        uint32_t type; uint64_t off, size;
        memcpy(&type, sh + 4, 4);
        memcpy(&off, sh + 0x18, 8);
        memcpy(&size, sh + 0x20, 8);
        if (type != 8 /* SHT_NOBITS */ && off + size > end) end = off + size;
    }
    return end;
}

/* ---- test controls (not HIP) ---------------------------------------------------- */
void fakehip_reset(void) {
    pthread_mutex_lock(&lock);
    record_count = 0;
    api_calls = 0;
    fail_loads = fail_launches = fail_mallocs = 0;
    malloc_limit = UINT64_MAX;
    mode = FAKEHIP_RECORD;
    callback = NULL;
    pthread_mutex_unlock(&lock);
    last_error = hipSuccess;
}
void fakehip_set_capturing(int on) { capturing = on; }
uint64_t fakehip_loads(void) { return loads; }
uint64_t fakehip_unloads(void) { return unloads; }
uint64_t fakehip_during_capture(void) { return during_capture; }
static void note_capture(void) {
    if (capturing) __atomic_add_fetch(&during_capture, 1, __ATOMIC_RELAXED);
}
hipError_t hipStreamIsCapturing(void *stream, int *status) {
    (void)stream;
    if (!status) return fail(hipErrorInvalidValue);
    *status = capturing ? 1 : 0;  /* hipStreamCaptureStatusActive : ...None */
    return hipSuccess;
}
void fakehip_set_device_count(int n) { device_count = n < 1 ? 1 : (n > MAX_DEVICES ? MAX_DEVICES : n); }
void fakehip_set_mode(int m, fakehip_callback cb) {
    pthread_mutex_lock(&lock);
    mode = m;
    callback = cb;
    pthread_mutex_unlock(&lock);
}
void fakehip_set_load_callback(fakehip_load_callback cb) { load_callback = cb; }
void fakehip_fail_next(int loads, int launches, int mallocs) {
    pthread_mutex_lock(&lock);
    fail_loads = loads; fail_launches = launches; fail_mallocs = mallocs;
    pthread_mutex_unlock(&lock);
}
void fakehip_set_malloc_limit(uint64_t bytes) { malloc_limit = bytes; }
uint64_t fakehip_allocated(void) { return allocated; }
uint64_t fakehip_launch_count(void) { return record_count; }
uint64_t fakehip_api_calls(void) { return api_calls; }
const fakehip_launch *fakehip_record(uint64_t i) {
    if (records == NULL || i >= record_count || i >= MAX_RECORDS) return NULL;
    return &records[i];
}
uint64_t fakehip_image_hash(const void *image, uint64_t size) { return fnv1a(image, size); }
/* The argument table of kernel `name` in the code object whose FNV-1a hash is
 * `image_hash` (0: any code object). */
int fakehip_set_kernel_args(uint64_t image_hash, const char *name, int count,
                            const uint32_t *offsets, const uint32_t *sizes,
                            uint32_t segment_size) {
    if (count > MAX_ARGS || segment_size > MAX_KERNARG) return hipErrorInvalidValue;
    for (int i = 0; i < count; i++)
        if (offsets[i] + sizes[i] > segment_size) return hipErrorInvalidValue;
    fake_kernel_args *a = calloc(1, sizeof *a);
    if (!a) return hipErrorOutOfMemory;
    snprintf(a->name, sizeof a->name, "%s", name);
    a->image_hash = image_hash;
    a->count = count;
    memcpy(a->offsets, offsets, count * sizeof *offsets);
    memcpy(a->sizes, sizes, count * sizeof *sizes);
    a->segment_size = segment_size;
    pthread_mutex_lock(&lock);
    a->next = kernel_args;
    kernel_args = a;
    pthread_mutex_unlock(&lock);
    return hipSuccess;
}

/* ---- devices ------------------------------------------------------------------- */
hipError_t hipGetDevice(int *device) {
    __atomic_add_fetch(&api_calls, 1, __ATOMIC_RELAXED);
    if (!device) return fail(hipErrorInvalidValue);
    *device = current_device;
    return hipSuccess;
}
hipError_t hipGetDeviceCount(int *count) {
    if (!count) return fail(hipErrorInvalidValue);
    *count = device_count;
    return hipSuccess;
}
hipError_t hipSetDevice(int device) {
    __atomic_add_fetch(&api_calls, 1, __ATOMIC_RELAXED);
    if (device < 0 || device >= device_count) return fail(hipErrorInvalidDevice);
    current_device = device;
    return hipSuccess;
}
hipError_t hipDeviceSynchronize(void) { note_capture(); return hipSuccess; }

hipError_t hipGetLastError(void) {
    hipError_t err = last_error;
    last_error = hipSuccess;
    return err;
}
const char *hipGetErrorName(hipError_t err) {
    switch (err) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorOutOfMemory: return "hipErrorOutOfMemory";
    case hipErrorInvalidDevice: return "hipErrorInvalidDevice";
    case hipErrorInvalidImage: return "hipErrorInvalidImage";
    case hipErrorInvalidResourceHandle: return "hipErrorInvalidResourceHandle";
    case hipErrorNotFound: return "hipErrorNotFound";
    case hipErrorLaunchFailure: return "hipErrorLaunchFailure";
    default: return "hipErrorUnknown";
    }
}

/* ---- memory -------------------------------------------------------------------- */
hipError_t hipMalloc(void **ptr, size_t size) {
    note_capture();
    __atomic_add_fetch(&api_calls, 1, __ATOMIC_RELAXED);
    if (!ptr) return fail(hipErrorInvalidValue);
    pthread_mutex_lock(&lock);
    int injected = fail_mallocs > 0;
    if (injected) fail_mallocs--;
    pthread_mutex_unlock(&lock);
    if (injected || size > malloc_limit) return fail(hipErrorOutOfMemory);
    void *p = NULL;
    if (posix_memalign(&p, 256, size ? size : 1) != 0) return fail(hipErrorOutOfMemory);
    __atomic_add_fetch(&allocated, size, __ATOMIC_RELAXED);
    *ptr = p;
    return hipSuccess;
}
hipError_t hipFree(void *ptr) { free(ptr); return hipSuccess; }
hipError_t hipMemcpy(void *dst, const void *src, size_t size, int kind) {
    note_capture();
    (void)kind;
    if (size && (!dst || !src)) return fail(hipErrorInvalidValue);
    memmove(dst, src, size);
    return hipSuccess;
}
hipError_t hipMemcpyAsync(void *dst, const void *src, size_t size, int kind, void *stream) {
    (void)stream;
    return hipMemcpy(dst, src, size, kind);
}
hipError_t hipMemset(void *dst, int value, size_t size) {
    if (size && !dst) return fail(hipErrorInvalidValue);
    memset(dst, value, size);
    return hipSuccess;
}
hipError_t hipMemsetD16Async(void *dst, unsigned short value, size_t count, void *stream) {
    (void)stream;
    uint16_t *p = dst;
    for (size_t i = 0; i < count; i++) p[i] = value;
    return hipSuccess;
}
hipError_t hipMemsetD32Async(void *dst, int value, size_t count, void *stream) {
    (void)stream;
    int32_t *p = dst;
    for (size_t i = 0; i < count; i++) p[i] = value;
    return hipSuccess;
}
hipError_t hipHostRegister(void *ptr, size_t size, unsigned flags) {
    (void)ptr; (void)size; (void)flags;
    return hipSuccess;
}
hipError_t hipHostUnregister(void *ptr) { (void)ptr; return hipSuccess; }
hipError_t hipHostGetDevicePointer(void **device_ptr, void *host_ptr, unsigned flags) {
    (void)flags;
    if (!device_ptr) return fail(hipErrorInvalidValue);
    *device_ptr = host_ptr;
    return hipSuccess;
}

/* ---- streams and events ---------------------------------------------------------- */
static int next_stream_id = 1;
hipError_t hipStreamCreate(void **stream) {
    if (!stream) return fail(hipErrorInvalidValue);
    fake_stream *s = calloc(1, sizeof *s);
    if (!s) return fail(hipErrorOutOfMemory);
    s->device = current_device;
    s->id = __atomic_fetch_add(&next_stream_id, 1, __ATOMIC_RELAXED);
    *stream = s;
    return hipSuccess;
}
hipError_t hipStreamDestroy(void *stream) { free(stream); return hipSuccess; }
hipError_t hipStreamSynchronize(void *stream) { (void)stream; note_capture(); return hipSuccess; }
hipError_t hipStreamWaitEvent(void *stream, void *event, unsigned flags) {
    (void)stream; (void)event; (void)flags;
    return hipSuccess;
}
hipError_t hipEventCreateWithFlags(void **event, unsigned flags) {
    (void)flags;
    if (!event) return fail(hipErrorInvalidValue);
    fake_event *e = calloc(1, sizeof *e);
    if (!e) return fail(hipErrorOutOfMemory);
    *event = e;
    return hipSuccess;
}
hipError_t hipEventDestroy(void *event) { free(event); return hipSuccess; }
hipError_t hipEventRecord(void *event, void *stream) {
    (void)stream;
    if (!event) return fail(hipErrorInvalidResourceHandle);
    clock_gettime(CLOCK_MONOTONIC, &((fake_event *)event)->when);
    return hipSuccess;
}
hipError_t hipEventSynchronize(void *event) { (void)event; note_capture(); return hipSuccess; }

/* ---- modules and launches ---------------------------------------------------------- */
hipError_t hipModuleLoadData(void **module, const void *image) {
    __atomic_add_fetch(&api_calls, 1, __ATOMIC_RELAXED);
    if (!module || !image) return fail(hipErrorInvalidValue);
    pthread_mutex_lock(&lock);
    int injected = fail_loads > 0;
    if (injected) fail_loads--;
    pthread_mutex_unlock(&lock);
    if (injected) return fail(hipErrorInvalidImage);
    uint64_t size = elf_size(image);
    if (size == 0) return fail(hipErrorInvalidImage);
    if (load_callback && load_callback(image, size) != 0) return fail(hipErrorInvalidImage);
    fake_module *m = calloc(1, sizeof *m);
    void *copy = malloc(size);
    if (!m || !copy) { free(m); free(copy); return fail(hipErrorOutOfMemory); }
    memcpy(copy, image, size);
    m->image = copy;
    m->size = size;
    m->hash = fnv1a(copy, size);
    __atomic_add_fetch(&loads, 1, __ATOMIC_RELAXED);
    note_capture();
    m->device = current_device;
    m->id = __atomic_fetch_add(&next_module_id, 1, __ATOMIC_RELAXED);
    *module = m;
    return hipSuccess;
}
hipError_t hipModuleUnload(void *module) {
    fake_module *m = module;
    if (!m) return fail(hipErrorInvalidResourceHandle);
    m->unloaded = 1;  /* kept, so a launch after unloading is caught */
    __atomic_add_fetch(&unloads, 1, __ATOMIC_RELAXED);
    note_capture();
    return hipSuccess;
}
hipError_t hipModuleGetFunction(void **function, void *module, const char *name) {
    __atomic_add_fetch(&api_calls, 1, __ATOMIC_RELAXED);
    fake_module *m = module;
    if (!function || !m || !name) return fail(hipErrorInvalidValue);
    if (m->unloaded) return fail(hipErrorInvalidResourceHandle);
    fake_function *f = calloc(1, sizeof *f);
    if (!f) return fail(hipErrorOutOfMemory);
    f->module = m;
    snprintf(f->name, sizeof f->name, "%s", name);
    *function = f;
    return hipSuccess;
}
hipError_t hipModuleOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, void *function,
                                                              int block_size, size_t shared) {
    (void)function; (void)block_size; (void)shared;
    if (!blocks) return fail(hipErrorInvalidValue);
    *blocks = 1;
    return hipSuccess;
}

static fake_kernel_args *find_args(fake_function *f) {
    if (f->args) return f->args;
    uint64_t hash = f->module->hash;  /* (hashing the image per launch cost ~10 us) */
    pthread_mutex_lock(&lock);
    fake_kernel_args *found = NULL;
    for (fake_kernel_args *a = kernel_args; a; a = a->next)
        if (strcmp(a->name, f->name) == 0 && (a->image_hash == 0 || a->image_hash == hash)) {
            found = a;
            break;
        }
    pthread_mutex_unlock(&lock);
    f->args = found;
    return found;
}

hipError_t hipModuleLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz,
                                 unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                 void *stream, void **params, void **extra) {
    __atomic_add_fetch(&api_calls, 1, __ATOMIC_RELAXED);
    fake_function *f = function;
    if (!f || !f->module) return fail(hipErrorInvalidResourceHandle);
    if (f->module->unloaded) return fail(hipErrorInvalidResourceHandle);
    if (f->module->device != current_device) return fail(hipErrorInvalidResourceHandle);
    if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || bx * by * bz > 1024)
        return fail(hipErrorInvalidValue);
    pthread_mutex_lock(&lock);
    int injected = fail_launches > 0;
    if (injected) fail_launches--;
    if (records == NULL) records = calloc(MAX_RECORDS, sizeof *records);
    uint64_t index = record_count++;
    int launch_mode = mode;
    fakehip_callback cb = callback;
    pthread_mutex_unlock(&lock);
    if (injected) return fail(hipErrorLaunchFailure);

    fakehip_launch local;
    fakehip_launch *r = (index < MAX_RECORDS && records) ? &records[index] : &local;
    r->module_id = f->module->id;
    r->module_device = f->module->device;
    r->device = current_device;
    r->image = f->module->image;
    r->image_size = f->module->size;
    memcpy(r->kernel, f->name, sizeof r->kernel);
    r->grid[0] = gx; r->grid[1] = gy; r->grid[2] = gz;
    r->block[0] = bx; r->block[1] = by; r->block[2] = bz;
    r->shared_bytes = shared;
    r->stream = stream;
    r->kernarg_size = 0;
    if (extra) {
        /* HIP_LAUNCH_PARAM_BUFFER_POINTER (1), ptr, HIP_LAUNCH_PARAM_BUFFER_SIZE (2),
         * &size, HIP_LAUNCH_PARAM_END (3) */
        void *buffer = NULL; size_t *size = NULL;
        for (int i = 0; extra[i] != (void *)3 && i < 8; i += 2) {
            if (extra[i] == (void *)1) buffer = extra[i + 1];
            if (extra[i] == (void *)2) size = extra[i + 1];
        }
        if (!buffer || !size || *size > MAX_KERNARG) return fail(hipErrorInvalidValue);
        memcpy(r->kernarg, buffer, *size);
        r->kernarg_size = (uint32_t)*size;
    } else if (params) {
        fake_kernel_args *a = find_args(f);
        if (a) {
            memset(r->kernarg, 0, a->segment_size);
            for (int i = 0; i < a->count; i++)
                memcpy(r->kernarg + a->offsets[i], params[i], a->sizes[i]);
            r->kernarg_size = a->segment_size;
        }
    }
    if (launch_mode == FAKEHIP_CALLBACK && cb && cb(r) != 0) return fail(hipErrorLaunchFailure);
    return hipSuccess;
}
