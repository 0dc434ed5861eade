"""The adoption audit's parts (used by `kernelsage.graph.adoption_audit`): an item's cues (`cues`), C and C++
read through the host preprocessor and tree-sitter (`preprocess`, `cpp_syntax`, `cpp`), Python through
`ast` (`python`), what of a file runs (`liveness`), and the code view the verdict compares (`code`)."""
