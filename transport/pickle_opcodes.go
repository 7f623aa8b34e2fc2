package transport

import "fmt"

// Opcodes (pickletools names).
const (
	opMARK            = '('
	opSTOP            = '.'
	opPOP             = '0'
	opPOP_MARK        = '1'
	opDUP             = '2'
	opFLOAT           = 'F'
	opINT             = 'I'
	opBININT          = 'J'
	opBININT1         = 'K'
	opLONG            = 'L'
	opBININT2         = 'M'
	opNONE            = 'N'
	opPERSID          = 'P'
	opBINPERSID       = 'Q'
	opREDUCE          = 'R'
	opSTRING          = 'S'
	opBINSTRING       = 'T'
	opSHORT_BINSTRING = 'U'
	opUNICODE         = 'V'
	opBINUNICODE      = 'X'
	opAPPEND          = 'a'
	opBUILD           = 'b'
	opGLOBAL          = 'c'
	opDICT            = 'd'
	opEMPTY_DICT      = '}'
	opAPPENDS         = 'e'
	opGET             = 'g'
	opBINGET          = 'h'
	opINST            = 'i'
	opLONG_BINGET     = 'j'
	opLIST            = 'l'
	opEMPTY_LIST      = ']'
	opOBJ             = 'o'
	opPUT             = 'p'
	opBINPUT          = 'q'
	opLONG_BINPUT     = 'r'
	opSETITEM         = 's'
	opTUPLE           = 't'
	opEMPTY_TUPLE     = ')'
	opSETITEMS        = 'u'
	opBINFLOAT        = 'G'
	opPROTO           = 0x80
	opNEWOBJ          = 0x81
	opEXT1            = 0x82
	opEXT2            = 0x83
	opEXT4            = 0x84
	opTUPLE1          = 0x85
	opTUPLE2          = 0x86
	opTUPLE3          = 0x87
	opNEWTRUE         = 0x88
	opNEWFALSE        = 0x89
	opLONG1           = 0x8a
	opLONG4           = 0x8b
	opBINBYTES        = 'B'
	opSHORT_BINBYTES  = 'C'
	opSHORT_BINUNI    = 0x8c
	opBINUNICODE8     = 0x8d
	opBINBYTES8       = 0x8e
	opEMPTY_SET       = 0x8f
	opADDITEMS        = 0x90
	opFROZENSET       = 0x91
	opNEWOBJ_EX       = 0x92
	opSTACK_GLOBAL    = 0x93
	opMEMOIZE         = 0x94
	opFRAME           = 0x95
	opBYTEARRAY8      = 0x96
	opNEXT_BUFFER     = 0x97
	opREADONLY_BUFFER = 0x98
)

var opNames = map[byte]string{
	opMARK: "MARK", opSTOP: "STOP", opPOP: "POP", opPOP_MARK: "POP_MARK", opDUP: "DUP",
	opFLOAT: "FLOAT", opINT: "INT", opBININT: "BININT", opBININT1: "BININT1", opLONG: "LONG",
	opBININT2: "BININT2", opNONE: "NONE", opPERSID: "PERSID", opBINPERSID: "BINPERSID",
	opREDUCE: "REDUCE", opSTRING: "STRING", opBINSTRING: "BINSTRING",
	opSHORT_BINSTRING: "SHORT_BINSTRING", opUNICODE: "UNICODE", opBINUNICODE: "BINUNICODE",
	opAPPEND: "APPEND", opBUILD: "BUILD", opGLOBAL: "GLOBAL", opDICT: "DICT",
	opEMPTY_DICT: "EMPTY_DICT", opAPPENDS: "APPENDS", opGET: "GET", opBINGET: "BINGET",
	opINST: "INST", opLONG_BINGET: "LONG_BINGET", opLIST: "LIST", opEMPTY_LIST: "EMPTY_LIST",
	opOBJ: "OBJ", opPUT: "PUT", opBINPUT: "BINPUT", opLONG_BINPUT: "LONG_BINPUT",
	opSETITEM: "SETITEM", opTUPLE: "TUPLE", opEMPTY_TUPLE: "EMPTY_TUPLE", opSETITEMS: "SETITEMS",
	opBINFLOAT: "BINFLOAT", opPROTO: "PROTO", opNEWOBJ: "NEWOBJ", opEXT1: "EXT1", opEXT2: "EXT2",
	opEXT4: "EXT4", opTUPLE1: "TUPLE1", opTUPLE2: "TUPLE2", opTUPLE3: "TUPLE3",
	opNEWTRUE: "NEWTRUE", opNEWFALSE: "NEWFALSE", opLONG1: "LONG1", opLONG4: "LONG4",
	opBINBYTES: "BINBYTES", opSHORT_BINBYTES: "SHORT_BINBYTES", opSHORT_BINUNI: "SHORT_BINUNICODE",
	opBINUNICODE8: "BINUNICODE8", opBINBYTES8: "BINBYTES8", opEMPTY_SET: "EMPTY_SET",
	opADDITEMS: "ADDITEMS", opFROZENSET: "FROZENSET", opNEWOBJ_EX: "NEWOBJ_EX",
	opSTACK_GLOBAL: "STACK_GLOBAL", opMEMOIZE: "MEMOIZE", opFRAME: "FRAME",
	opBYTEARRAY8: "BYTEARRAY8", opNEXT_BUFFER: "NEXT_BUFFER", opREADONLY_BUFFER: "READONLY_BUFFER",
}

func opName(op byte) string {
	if n, ok := opNames[op]; ok {
		return n
	}
	return fmt.Sprintf("0x%02x", op)
}
