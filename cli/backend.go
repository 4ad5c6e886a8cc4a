package cli

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gomlx/compute/dtypes"
	"github.com/spf13/pflag"

	"agentrl/engine/device"
	"agentrl/engine/model"
)

// backendFlags are shared by every command that computes: --backend and --plugin.
type backendFlags struct {
	kind, plugin, compileCache string
}

func (b *backendFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&b.kind, "backend", "auto", "compute backend: auto (CUDA when a GPU and the PJRT plugin are found, else go), go, cuda")
	fs.StringVar(&b.plugin, "plugin", "", "the PJRT CUDA plugin (xla_cuda_plugin.so from JAX's wheel, pjrt_c_api_cuda_plugin.so from go-xla's installer) or a folder holding one; default: searched")
	fs.StringVar(&b.compileCache, "compile-cache", "", "where the XLA backend keeps compiled programs between runs (default ~/.cache/agentrl-tui/xla; off: none); the go backend has no cache")
}

// open opens the backend and says on w which one and why.
func (b *backendFlags) open(w io.Writer) (*device.Choice, error) { return b.openFor(w, 0) }

// openFor is open for a model of params parameters (0: unknown; see device.GoConfigFor).
func (b *backendFlags) openFor(w io.Writer, params int64) (*device.Choice, error) {
	c, err := device.Open(device.Request{Kind: b.kind, PluginPath: b.plugin, ModelParams: params, CompileCache: b.compileCache})
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(w, c.Reason)
	if c.Cache != nil {
		fmt.Fprintln(w, c.CacheNote)
	}
	return c, nil
}

// loadModel opens the backend and loads a HuggingFace folder onto it.
func (b *backendFlags) loadModel(w io.Writer, dir string, dt dtypes.DType) (*model.Model, error) {
	choice, err := b.open(w)
	if err != nil {
		return nil, err
	}
	return model.Load(choice.Backend, dir, model.Options{Compute: dt})
}

func parseIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		v, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("--ids: %q is not a token id (want comma-separated integers like 1,2,3)", f)
		}
		ids = append(ids, int32(v))
	}
	if len(ids) == 0 {
		return nil, errors.New("--ids is empty: give comma-separated token ids like 1,2,3")
	}
	return ids, nil
}

func parseDType(s string) (dtypes.DType, error) {
	switch s {
	case "float32", "f32":
		return dtypes.Float32, nil
	case "bfloat16", "bf16":
		return dtypes.BFloat16, nil
	}
	return dtypes.InvalidDType, fmt.Errorf("--dtype %q is not float32 or bfloat16", s)
}
