package pjrt

/*
#include <stdlib.h>
#include "pjrt_c_api.h"
#include "gen_api_calls.h"
#include "gen_new_struct.h"

// The serialized bytes live as long as the plugin's backing object, freed by the deleter the call
// returned (a function pointer, which Go cannot call).
static void pjrt_free_serialized_executable(PJRT_Executable_Serialize_Args* args) {
	if (args->serialized_executable_deleter != NULL && args->serialized_executable != NULL) {
		args->serialized_executable_deleter(args->serialized_executable);
	}
}
*/
import "C"

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/pkg/errors"
	"google.golang.org/protobuf/proto"
)

// CompilationCache keeps compiled programs between processes. Once one is set
// (SetCompilationCache), CompileConfig.Done looks every program up by its key (CacheKey) before
// compiling it: a stored executable is loaded with PJRT_Executable_DeserializeAndLoad instead of
// compiled, and a compiled one is serialized with PJRT_Executable_Serialize and stored. A stored
// executable that does not load (another plugin build, a damaged file) is compiled again and
// stored over. Implementations must be safe for concurrent use.
type CompilationCache interface {
	// Load returns the serialized executable stored under key; ok is false when there is none.
	Load(key string) (data []byte, ok bool)
	// Store keeps a serialized executable under key.
	Store(key string, data []byte) error
	// Observe is told, once per program, what the cache did for it.
	Observe(CacheEvent)
}

// CacheEvent is what the compilation cache did for one program.
type CacheEvent struct {
	Key string
	// Hit: the program was loaded from the cache, not compiled.
	Hit bool
	// Bytes is the size of the serialized executable loaded or stored (0 when none was).
	Bytes int
	// Seconds spent loading (a hit) or compiling (a miss) the program.
	Seconds float64
	// Err is the cache's own failure, if any, which never fails the compilation: a stored
	// executable that did not load (then compiled again), or one that could not be serialized
	// or stored.
	Err error
}

type cacheHolder struct{ c CompilationCache }

var compilationCache atomic.Pointer[cacheHolder]

// SetCompilationCache makes every later compilation of the process go through c (nil: none).
func SetCompilationCache(c CompilationCache) {
	if c == nil {
		compilationCache.Store(nil)
		return
	}
	compilationCache.Store(&cacheHolder{c})
}

// cacheKeyVersion changes when what the key covers changes.
const cacheKeyVersion = "go-xla pjrt compilation cache 1"

// CacheKey is the key a program is stored under: the SHA-256, in hex, of everything the compiled
// executable depends on — the plugin (its name, path, size and modification time, PJRT API version),
// the client's platform and platform version, the kind of every addressable device (the GPU model),
// the XLA_FLAGS and XLA_DEBUG_OPTIONS environment variables, the program's format and bytes, and the
// compile options (serialized deterministically).
func (cc *CompileConfig) CacheKey() (string, error) {
	if cc.client == nil || cc.plugin == nil {
		return "", errors.New("misconfigured CompileConfig, or one already used")
	}
	options, err := proto.MarshalOptions{Deterministic: true}.Marshal(cc.options)
	if err != nil {
		return "", errors.WithMessagef(err, "failed to marshal the CompileOptionsProto for the cache key")
	}
	h := sha256.New()
	field := func(name string, value []byte) {
		_, _ = fmt.Fprintf(h, "%s %d\n", name, len(value))
		_, _ = h.Write(value)
	}
	field("version", []byte(cacheKeyVersion))
	field("plugin", []byte(cc.plugin.Name()))
	field("plugin_path", []byte(cc.plugin.Path()))
	if st, err := os.Stat(cc.plugin.Path()); err == nil {
		field("plugin_file", []byte(fmt.Sprintf("%d %d", st.Size(), st.ModTime().UnixNano())))
	}
	major, minor := cc.plugin.Version()
	field("pjrt_api", []byte(fmt.Sprintf("%d.%d", major, minor)))
	field("platform", []byte(cc.client.platform))
	field("platform_version", []byte(cc.client.platformVersion))
	for _, d := range cc.client.AddressableDevices() {
		kind := "unknown"
		if desc, err := d.GetDescription(); err == nil {
			kind = desc.Kind()
		}
		field("device", []byte(kind))
	}
	field("XLA_FLAGS", []byte(os.Getenv("XLA_FLAGS")))
	field(EnvXlaDebugOptions, []byte(os.Getenv(EnvXlaDebugOptions)))
	field("format", []byte(cc.programFormat))
	field("program", cc.program)
	field("options", options)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Kind is the vendor's name for the kind of device, e.g. "NVIDIA H100 80GB HBM3".
func (dDesc *DeviceDescription) Kind() string {
	args := C.new_PJRT_DeviceDescription_Kind_Args()
	defer cFree(args)
	args.device_description = dDesc.deviceDescription
	if err := toError(dDesc.plugin, C.call_PJRT_DeviceDescription_Kind(dDesc.plugin.api, args)); err != nil {
		return "unknown"
	}
	return cCharArray(args.device_kind, args.device_kind_size)
}

// Serialize returns the plugin's serialization of the compiled program, which
// Client.DeserializeAndLoad of the same plugin build loads without compiling. The serialization
// is not stable across plugin versions.
func (e *LoadedExecutable) Serialize() ([]byte, error) {
	if e == nil || e.plugin == nil || e.executable == nil || e.executable.wrapper == nil {
		return nil, errors.New("LoadedExecutable is nil or destroyed")
	}
	defer runtime.KeepAlive(e)
	args := C.new_PJRT_Executable_Serialize_Args()
	defer cFree(args)
	args.executable = e.executable.wrapper.c
	if err := toError(e.plugin, C.call_PJRT_Executable_Serialize(e.plugin.api, args)); err != nil {
		return nil, errors.WithMessagef(err, "PJRT_Executable_Serialize")
	}
	defer C.pjrt_free_serialized_executable(args)
	n := int(args.serialized_bytes_size)
	if n == 0 || args.serialized_bytes == nil {
		return nil, errors.New("PJRT_Executable_Serialize returned no bytes")
	}
	out := make([]byte, n)
	copy(out, unsafe.Slice((*byte)(unsafe.Pointer(args.serialized_bytes)), n))
	return out, nil
}

// DeserializeAndLoad loads an executable that LoadedExecutable.Serialize wrote (with the same
// plugin build) onto the client's devices. options, when not empty, is a serialized
// CompileOptionsProto that replaces the one stored with the executable.
func (c *Client) DeserializeAndLoad(data, options []byte) (*LoadedExecutable, error) {
	if c == nil || c.plugin == nil || c.client == nil {
		return nil, errors.New("Client is nil or destroyed")
	}
	if len(data) == 0 {
		return nil, errors.New("DeserializeAndLoad: no bytes")
	}
	defer runtime.KeepAlive(c)
	args := C.new_PJRT_Executable_DeserializeAndLoad_Args()
	defer cFree(args)
	args.client = c.client.c
	cData := C.CBytes(data)
	defer C.free(cData)
	args.serialized_executable = (*C.char)(cData)
	args.serialized_executable_size = C.size_t(len(data))
	if len(options) > 0 {
		cOptions := C.CBytes(options)
		defer C.free(cOptions)
		args.overridden_serialized_compile_options = (*C.char)(cOptions)
		args.overridden_serialized_compile_options_size = C.size_t(len(options))
	}
	if err := toError(c.plugin, C.call_PJRT_Executable_DeserializeAndLoad(c.plugin.api, args)); err != nil {
		return nil, errors.WithMessagef(err, "PJRT_Executable_DeserializeAndLoad")
	}
	return newLoadedExecutable(c.plugin, c, args.loaded_executable)
}

// cachedCompile is pjrtClientCompile through the compilation cache, when one is set.
func (cc *CompileConfig) cachedCompile(binOptions []byte) (*LoadedExecutable, error) {
	holder := compilationCache.Load()
	if holder == nil {
		return pjrtClientCompile(cc.plugin, cc.client, cc.program, cc.programFormat, binOptions)
	}
	cache := holder.c
	key, err := cc.CacheKey()
	if err != nil {
		exec, cErr := pjrtClientCompile(cc.plugin, cc.client, cc.program, cc.programFormat, binOptions)
		if cErr == nil {
			cache.Observe(CacheEvent{Err: err})
		}
		return exec, cErr
	}
	var loadErr error
	t0 := time.Now()
	if data, ok := cache.Load(key); ok {
		exec, err := cc.client.DeserializeAndLoad(data, binOptions)
		if err == nil {
			cache.Observe(CacheEvent{Key: key, Hit: true, Bytes: len(data), Seconds: time.Since(t0).Seconds()})
			return exec, nil
		}
		loadErr = errors.WithMessagef(err, "the stored executable %s did not load; compiled it again", key)
	}
	t0 = time.Now()
	exec, err := pjrtClientCompile(cc.plugin, cc.client, cc.program, cc.programFormat, binOptions)
	if err != nil {
		return nil, err
	}
	ev := CacheEvent{Key: key, Seconds: time.Since(t0).Seconds(), Err: loadErr}
	data, err := exec.Serialize()
	if err == nil {
		err = cache.Store(key, data)
	}
	if err == nil {
		ev.Bytes = len(data)
	} else if ev.Err == nil {
		ev.Err = errors.WithMessagef(err, "storing the executable %s", key)
	}
	cache.Observe(ev)
	return exec, nil
}
