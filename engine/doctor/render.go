package doctor

import (
	"fmt"
	"io"
	"strings"
)

var sectionTitles = map[string]string{
	SecCPU: "CPU", SecMemory: "Memory", SecGPU: "GPU (NVML, PJRT CUDA plugin, CUDA libraries)", SecBackend: "Backend",
	SecPython: "Python for the reference benchmarks", SecSandbox: "Code sandbox", SecRecipe: "Recipe",
	SecEngines: "Rollout engines (rollout.engines)",
}

// Write prints the report for a person: one line per check under its section, the verdict in
// front (OK, INFO, WARN, FAIL), what to do on the line after it, then the verdict on the recipe.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "agentrl-tui doctor: %s\n", r.Recipe)
	section := ""
	for _, c := range r.Checks {
		if c.Section != section {
			section = c.Section
			fmt.Fprintf(w, "\n%s\n", sectionTitles[section])
		}
		fmt.Fprintf(w, "  %-4s  %-12s %s\n", strings.ToUpper(string(c.Status)), c.Name, c.Detail)
		if c.Fix != "" && c.Status != OK {
			fmt.Fprintf(w, "  %-4s  %-12s → %s\n", "", "", c.Fix)
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, r.Verdict())
}

// Verdict is the report's last line: whether the recipe runs here, on which backend, and
// whether the GPU path is ready (the question itself with --gpu).
func (r *Report) Verdict() string {
	gpu := "the GPU path is not ready (see GPU)"
	if r.GPUReady {
		gpu = "the GPU path is ready"
	}
	failed := strings.Join(r.Failed(), ", ")
	switch {
	case r.RequireGPU && !r.GPUReady:
		if failed == "" {
			failed = "none, but the CUDA backend did not open"
		}
		return fmt.Sprintf("NOT READY for the GPU path; failed: %s.", failed)
	case !r.CanRun:
		return fmt.Sprintf("NOT READY: %s cannot run here; failed: %s. %s.", r.Recipe, failed, upper(gpu))
	}
	return fmt.Sprintf("READY: %s runs here on the %s backend; %s.", r.Recipe, r.Backend, gpu)
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
