# Turns a SPIR-V binary into a C source defining `const <TYPE> <TYPE>_<NAME>`,
# where TYPE is a struct {const uint32_t *code; size_t size;} declared in
# HEADER. Run as:
#   cmake -DIN=x.spv -DOUT=x.c -DNAME=x -DTYPE=t -DHEADER=h.h -P embed_spirv.cmake
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" nhex)
math(EXPR rem "${nhex} % 8")
if(nhex EQUAL 0 OR NOT rem EQUAL 0)
  message(FATAL_ERROR "${IN}: not a SPIR-V binary (size ${nhex} hex digits)")
endif()
# SPIR-V words are little endian: bytes aabbccdd -> 0xddccbbaa.
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "((0x[0-9a-f]+u,){8})" "\\1\n    " words "${words}")
file(WRITE "${OUT}.tmp"
  "/* Generated from ${IN} by embed_spirv.cmake. Do not edit. */\n"
  "#include \"${HEADER}\"\n\n"
  "static const uint32_t words[] = {\n    ${words}\n};\n"
  "const ${TYPE} ${TYPE}_${NAME} = {words, sizeof words};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
