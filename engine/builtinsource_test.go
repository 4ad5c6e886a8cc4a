package engine

import "agentrl/engine/model"

// BuiltinSourceDir is model.BuiltinSourceDir under the name this package's tests knew it by
// before the built-in model's helpers moved to engine/model. It is a stopgap kept in its own file
// so that the move touched none of the loop's test files while they were being edited: replace
// the four uses (determinism, external, controller and hindsight tests) with
// model.BuiltinSourceDir and delete this file.
const BuiltinSourceDir = model.BuiltinSourceDir
