# Embed a text file as a NUL-terminated C array: cmake -DINPUT=f -DOUTPUT=f.c -DNAME=sym -P embed.cmake
file(READ "${INPUT}" hex HEX)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
file(WRITE "${OUTPUT}" "/* generated from ${INPUT} */\nconst char ${NAME}[] = {${body}0x00};\n")
