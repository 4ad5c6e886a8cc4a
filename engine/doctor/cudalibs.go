package doctor

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"agentrl/engine/device"
)

// cudaLib is a file the PJRT CUDA plugin loads (or XLA reads while compiling), and the folder
// below a CUDA root where it lives: JAX's CUDA 13 wheels put the libraries together in
// nvidia/cu13/lib (cuDNN and NCCL in nvidia/cudnn/lib, nvidia/nccl/lib), CUDA 12 wheels one
// folder per package (nvidia/cublas/lib, nvidia/cuda_nvcc/nvvm/libdevice), a system CUDA lib64.
type cudaLib struct {
	what, file, sub string
	optional        bool
	why             string // what is lost without an optional one
}

var cudaLibs = []cudaLib{
	{what: "CUDA runtime", file: "libcudart.so*", sub: "lib"},
	{what: "cuBLAS", file: "libcublas.so*", sub: "lib"},
	{what: "cuBLASLt", file: "libcublasLt.so*", sub: "lib"},
	{what: "cuDNN", file: "libcudnn.so*", sub: "lib"},
	{what: "nvJitLink", file: "libnvJitLink.so*", sub: "lib"},
	{what: "libdevice", file: "libdevice.10.bc", sub: "nvvm/libdevice"},
	{what: "cuFFT", file: "libcufft.so*", sub: "lib", optional: true, why: "FFTs, which the engine does not use"},
	{what: "cuSOLVER", file: "libcusolver.so*", sub: "lib", optional: true, why: "linear solvers, which the engine does not use"},
	{what: "cuSPARSE", file: "libcusparse.so*", sub: "lib", optional: true, why: "sparse ops, which the engine does not use"},
	{what: "NCCL", file: "libnccl.so*", sub: "lib", optional: true, why: "several GPUs; the engine uses one"},
	{what: "ptxas", file: "ptxas", sub: "bin", optional: true, why: "XLA then compiles PTX with the driver"},
}

// cudaRoots are the folders a CUDA library may sit below, for a plugin whose CUDA folder is dir
// (…/site-packages/nvidia/cu13, …/nvidia, or "" when the plugin came without one).
func cudaRoots(dir string, env device.Env) []string {
	var roots []string
	if dir != "" {
		roots = append(roots, dir)
		nv := dir
		if b := filepath.Base(dir); strings.HasPrefix(b, "cu") {
			nv = filepath.Dir(dir)
		}
		m, _ := env.Glob(filepath.Join(nv, "*"))
		for _, d := range m {
			if d != dir {
				roots = append(roots, d)
			}
		}
	}
	if m := cudaDataDir.FindStringSubmatch(env.Getenv("XLA_FLAGS")); m != nil {
		roots = append(roots, m[1])
	}
	for _, r := range []string{env.Getenv("CUDA_HOME"), "/usr/local/cuda"} {
		if r != "" {
			roots = append(roots, r)
		}
	}
	return roots
}

// findLib returns the first match of l below one of roots, "" when none.
func findLib(l cudaLib, roots []string, env device.Env) string {
	subs := []string{l.sub}
	if l.sub == "lib" {
		subs = append(subs, "lib64")
	}
	for _, r := range roots {
		for _, s := range subs {
			if m, _ := env.Glob(filepath.Join(r, s, l.file)); len(m) > 0 {
				return m[0]
			}
		}
	}
	return ""
}

// cudaLibs checks the libraries the plugin p needs, and that the driver supports the CUDA major
// version the plugin was built for.
func (d *doc) cudaLibs(p *device.Plugin) {
	roots := cudaRoots(p.CUDADir, d.env.Device)
	var missing, optMissing []string
	found := 0
	for _, l := range cudaLibs {
		if findLib(l, roots, d.env.Device) != "" {
			found++
			continue
		}
		if l.optional {
			optMissing = append(optMissing, fmt.Sprintf("%s (%s: only for %s)", l.what, l.file, l.why))
		} else {
			missing = append(missing, fmt.Sprintf("%s (%s)", l.what, l.file))
		}
	}
	where := p.CUDADir
	if where == "" {
		up := filepath.Dir(filepath.Dir(p.Path))
		where = fmt.Sprintf("no nvidia/ folder beside the plugin (%s or %s, where its RPATH looks)",
			filepath.Join(up, "nvidia"), filepath.Join(filepath.Dir(up), "nvidia"))
		if len(roots) > 0 {
			where += "; searched " + strings.Join(roots, ", ")
		}
	}
	fix := device.LibsFix(p)
	switch {
	case len(missing) > 0:
		st := Warn
		if d.usesGPU() {
			st = Fail
		}
		d.add(SecGPU, "cuda_libs", st, fmt.Sprintf("missing %s (%s)", strings.Join(missing, ", "), where), fix)
	default:
		detail := fmt.Sprintf("%d of %d found (%s)", found, len(cudaLibs), where)
		if len(optMissing) > 0 {
			detail += "; not needed here: " + strings.Join(optMissing, ", ")
		}
		d.add(SecGPU, "cuda_libs", OK, detail, "")
		d.libsOK = true
	}
	d.cudaVersion(p)
}

var (
	pluginMajor = regexp.MustCompile(`xla_cuda(\d+)|nvidia/cu(\d+)$`)
	cudaDataDir = regexp.MustCompile(`--xla_gpu_cuda_data_dir=(\S+)`)
)

// cudaVersion compares the CUDA major version of the plugin (xla_cuda13 → 13) with the newest
// CUDA version the driver supports; only with a GPU.
func (d *doc) cudaVersion(p *device.Plugin) {
	g := d.rep.GPU
	// JAX's wheel names the major in its folder (xla_cuda13); go-xla's installer renames the
	// plugin, so its CUDA folder (nvidia/cu13) says it
	m := pluginMajor.FindStringSubmatch(p.Path)
	if m == nil {
		m = pluginMajor.FindStringSubmatch(p.CUDADir)
	}
	if !g.Seen || g.CUDA == "" || m == nil {
		return
	}
	want, _ := strconv.Atoi(m[1] + m[2])
	have, _ := strconv.Atoi(strings.SplitN(g.CUDA, ".", 2)[0])
	if have >= want {
		d.add(SecGPU, "cuda_version", OK, fmt.Sprintf("the plugin is built for CUDA %d; driver %s supports CUDA %s", want, g.Driver, g.CUDA), "")
		return
	}
	d.libsOK = false
	st := Warn
	if d.usesGPU() {
		st = Fail
	}
	d.add(SecGPU, "cuda_version", st, fmt.Sprintf("the plugin is built for CUDA %d but driver %s supports only CUDA %s", want, g.Driver, g.CUDA),
		fmt.Sprintf("update the NVIDIA driver to one that supports CUDA %d, or install the plugin for CUDA %d (pip install 'jax[cuda%d]', or go-xla's installer with -plugin cuda%d)", want, have, have, have))
}
