package vm

// BuildTestProgram lets the external tests (package vm_test) build their
// testdata commands the same way.
var BuildTestProgram = buildTestProgram
