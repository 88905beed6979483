/* vkattn: the command-line tool (everything is in cli_main.c). */
#include "cli.h"

int main(int argc, char **argv) { return cli_main(argc, argv); }
