package compute

// AgentrlPatches names this copy of gomlx/compute: the release it was taken from and how many of
// agentrl's patches (PATCHES.md) it carries. agentrl keys the kernel choices it caches by it, so a
// patch that changes how fast a kernel set runs must bump it, and a cached choice made before the
// patch is measured again.
const AgentrlPatches = "v0.1.6+agentrl.23"
