package policy

import "slices"

// The Python vocabulary the eval-* rules are checked against, for CPython 3.11 to
// 3.14. The Go side cannot ask an interpreter, so the names are listed here; the
// Python-side checker remains the judge of what the running interpreter has.

// evalNodeKinds groups the concrete ast node classes by their abstract base. Only
// concrete classes (the ones ast.parse can produce) are listed: abstract bases,
// helpers and the deprecated aliases are not node names.
var evalNodeKinds = []struct {
	base  string
	nodes []string
}{
	{"mod", []string{"Module", "Interactive", "Expression", "FunctionType"}},
	// A class marked 3.12+ or 3.14+ is accepted on every version: on an older
	// interpreter it simply never appears in a parsed tree.
	{"stmt", []string{
		"FunctionDef", "AsyncFunctionDef", "ClassDef", "Return", "Delete", "Assign",
		"TypeAlias", // 3.12+
		"AugAssign", "AnnAssign", "For", "AsyncFor", "While", "If", "With", "AsyncWith",
		"Match", "Raise", "Try", "TryStar", "Assert", "Import", "ImportFrom", "Global",
		"Nonlocal", "Expr", "Pass", "Break", "Continue",
	}},
	{"expr", []string{
		"BoolOp", "NamedExpr", "BinOp", "UnaryOp", "Lambda", "IfExp", "Dict", "Set",
		"ListComp", "SetComp", "DictComp", "GeneratorExp", "Await", "Yield", "YieldFrom",
		"Compare", "Call", "FormattedValue", "JoinedStr",
		"Interpolation", "TemplateStr", // 3.14+
		"Constant", "Attribute", "Subscript", "Starred", "Name", "List", "Tuple", "Slice",
	}},
	{"expr_context", []string{"Load", "Store", "Del"}},
	{"boolop", []string{"And", "Or"}},
	{"operator", []string{
		"Add", "Sub", "Mult", "MatMult", "Div", "Mod", "Pow", "LShift", "RShift", "BitOr",
		"BitXor", "BitAnd", "FloorDiv",
	}},
	{"unaryop", []string{"Invert", "Not", "UAdd", "USub"}},
	{"cmpop", []string{"Eq", "NotEq", "Lt", "LtE", "Gt", "GtE", "Is", "IsNot", "In", "NotIn"}},
	{"excepthandler", []string{"ExceptHandler"}},
	{"pattern", []string{
		"MatchValue", "MatchSingleton", "MatchSequence", "MatchMapping", "MatchClass",
		"MatchStar", "MatchAs", "MatchOr",
	}},
	{"type_ignore", []string{"TypeIgnore"}},
	{"type_param", []string{"TypeVar", "ParamSpec", "TypeVarTuple"}}, // 3.12+
	// Node classes without an abstract base.
	{"", []string{"comprehension", "arguments", "arg", "keyword", "alias", "withitem", "match_case"}},
}

// evalRemovedNodes are ast class names that are not nodes of the parser's output:
// the deprecated aliases (rejected on every version, even where the class still
// exists) and the dummy context classes, with the advice given for each.
var evalRemovedNodes = map[string]string{
	"Num":          "a removed alias of Constant (constants are always allowed)",
	"Str":          "a removed alias of Constant (constants are always allowed)",
	"Bytes":        "a removed alias of Constant (constants are always allowed)",
	"NameConstant": "a removed alias of Constant (constants are always allowed)",
	"Ellipsis":     "a removed alias of Constant (constants are always allowed)",
	"Index":        "a removed ast class (a subscript's index is its expression itself)",
	"ExtSlice":     "a removed ast class (an extended slice is a Tuple)",
	"Suite":        "a removed ast class that the parser never produces",
	"Param":        "a removed ast class that the parser never produces",
	"AugLoad":      "a removed ast class that the parser never produces",
	"AugStore":     "a removed ast class that the parser never produces",
}

// evalAbstractNodes are the abstract ast bases: they name a family, never a node.
var evalAbstractNodes = []string{
	"AST", "mod", "stmt", "expr", "expr_context", "boolop", "operator", "unaryop",
	"cmpop", "excepthandler", "pattern", "type_ignore", "type_param", "slice",
}

// evalASTHelpers are the public names of the ast module that are not node classes.
// "compare" (an ast function since 3.14) is absent on purpose: it is a syntax group.
var evalASTHelpers = []string{
	"parse", "unparse", "dump", "literal_eval", "walk", "iter_fields", "iter_child_nodes",
	"fix_missing_locations", "copy_location", "increment_lineno", "get_docstring",
	"get_source_segment", "NodeVisitor", "NodeTransformer", "main",
	"PyCF_ONLY_AST", "PyCF_TYPE_COMMENTS", "PyCF_ALLOW_TOP_LEVEL_AWAIT", "PyCF_OPTIMIZED_AST",
}

// evalCoreNodes are always allowed in a declared profile.
var evalCoreNodes = []string{
	"Module", "Expression", "Interactive", "Constant", "Name", "Load", "Store", "Del",
	"Tuple", "List", "Dict", "Set", "Expr", "Pass",
}

// evalSyntaxGroups are the eval-syntax groups and their nodes.
var evalSyntaxGroups = map[string][]string{
	"arith":         {"BinOp", "UnaryOp"},
	"compare":       {"Compare", "BoolOp"},
	"conditional":   {"If", "IfExp"},
	"loop":          {"For", "While", "Break", "Continue"},
	"comprehension": {"ListComp", "SetComp", "DictComp", "GeneratorExp", "comprehension"},
	"assign":        {"Assign", "AugAssign", "AnnAssign", "NamedExpr"},
	"func":          {"FunctionDef", "Return", "arguments", "arg", "Lambda"},
	"async":         {"AsyncFunctionDef", "Await", "AsyncFor", "AsyncWith"},
	"class":         {"ClassDef"},
	"exception":     {"Try", "TryStar", "Raise", "ExceptHandler"},
	"context":       {"With", "withitem"},
	"import":        {"Import", "ImportFrom", "alias"},
	"subscript":     {"Subscript", "Slice", "Starred"},
	"fstring":       {"JoinedStr", "FormattedValue"},
	"tstring":       {"TemplateStr", "Interpolation"},
	"yield":         {"Yield", "YieldFrom"},
}

// evalAttributeGroups are the eval-attribute groups. Their members are the public
// names of builtin types on the running interpreter, so only the Python side can
// expand them.
var evalAttributeGroups = []string{
	"str-methods", "list-methods", "dict-methods", "set-methods", "tuple-methods",
	"num-methods", "bytes-methods", "date-methods",
}

// evalFrameAttributes are always denied: no rule can grant them.
var evalFrameAttributes = []string{
	"gi_frame", "gi_code", "gi_yieldfrom", "cr_frame", "cr_code", "cr_await", "ag_frame",
	"ag_code", "f_globals", "f_locals", "f_builtins", "f_back", "f_trace", "tb_frame", "tb_next",
}

// evalSensitiveCalls are the builtins whose grant by eval-call is warned more
// strongly, with what granting them does. locals is not in upstream's list; it is
// added because it hands the evaluation namespace (helpers included) to the code.
var evalSensitiveCalls = map[string]string{
	"getattr":    "it goes through the attribute gate, so eval-attribute and eval-magic still decide each name",
	"hasattr":    "it goes through the attribute gate, and a refused name raises instead of returning False",
	"vars":       "vars(o) reads o.__dict__ and needs eval-magic=__dict__; vars() is refused",
	"setattr":    "it is always refused at run time: the sub-language never mutates attributes",
	"delattr":    "it is always refused at run time: the sub-language never mutates attributes",
	"dir":        "dir() is refused and dir(o) is filtered by the attribute rules",
	"globals":    "it is always refused at run time",
	"locals":     "it hands the evaluation namespace to the code",
	"type":       "only the one-argument form is allowed; the class factory is refused",
	"breakpoint": "it is always refused at run time",
	"open":       "it reaches the files guard, which decides what can be opened",
	"eval":       "it re-enters the eval guard",
	"exec":       "it re-enters the eval guard",
	"compile":    "it re-enters the eval guard",
	"__import__": "it reaches the import guard, which decides which modules load",
}

// evalBuiltins are the callable public names of the builtins module (union of
// CPython 3.11 to 3.13; 3.14 adds none), plus __import__ and __build_class__.
// eval-call naming one of them adds a builtin to the namespace of evaluated code.
var evalBuiltins = []string{
	"ArithmeticError", "AssertionError", "AttributeError", "BaseException",
	"BaseExceptionGroup", "BlockingIOError", "BrokenPipeError", "BufferError",
	"BytesWarning", "ChildProcessError", "ConnectionAbortedError", "ConnectionError",
	"ConnectionRefusedError", "ConnectionResetError", "DeprecationWarning", "EOFError",
	"EncodingWarning", "EnvironmentError", "Exception", "ExceptionGroup", "FileExistsError",
	"FileNotFoundError", "FloatingPointError", "FutureWarning", "GeneratorExit", "IOError",
	"ImportError", "ImportWarning", "IndentationError", "IndexError", "InterruptedError",
	"IsADirectoryError", "KeyError", "KeyboardInterrupt", "LookupError", "MemoryError",
	"ModuleNotFoundError", "NameError", "NotADirectoryError", "NotImplementedError",
	"OSError", "OverflowError", "PendingDeprecationWarning", "PermissionError",
	"ProcessLookupError", "PythonFinalizationError", "RecursionError", "ReferenceError",
	"ResourceWarning", "RuntimeError", "RuntimeWarning", "StopAsyncIteration",
	"StopIteration", "SyntaxError", "SyntaxWarning", "SystemError", "SystemExit", "TabError",
	"TimeoutError", "TypeError", "UnboundLocalError", "UnicodeDecodeError",
	"UnicodeEncodeError", "UnicodeError", "UnicodeTranslateError", "UnicodeWarning",
	"UserWarning", "ValueError", "Warning", "ZeroDivisionError", "__build_class__",
	"__import__", "abs", "aiter", "all", "anext", "any", "ascii", "bin", "bool", "breakpoint",
	"bytearray", "bytes", "callable", "chr", "classmethod", "compile", "complex", "copyright",
	"credits", "delattr", "dict", "dir", "divmod", "enumerate", "eval", "exec", "exit",
	"filter", "float", "format", "frozenset", "getattr", "globals", "hasattr", "hash", "help",
	"hex", "id", "input", "int", "isinstance", "issubclass", "iter", "len", "license", "list",
	"locals", "map", "max", "memoryview", "min", "next", "object", "oct", "open", "ord", "pow",
	"print", "property", "quit", "range", "repr", "reversed", "round", "set", "setattr",
	"slice", "sorted", "staticmethod", "str", "sum", "super", "tuple", "type", "vars", "zip",
}

// evalNodeSet, evalBuiltinSet and evalSyntaxVocab are derived once from the lists.
var (
	evalNodeSet     = map[string]bool{}
	evalBuiltinSet  = map[string]bool{}
	evalFrameSet    = map[string]bool{}
	evalSyntaxVocab []string // groups then node names: the candidates of a suggestion
)

func init() {
	for _, k := range evalNodeKinds {
		for _, n := range k.nodes {
			evalNodeSet[n] = true
			evalSyntaxVocab = append(evalSyntaxVocab, n)
		}
	}
	for g := range evalSyntaxGroups {
		evalSyntaxVocab = append(evalSyntaxVocab, g)
	}
	for _, b := range evalBuiltins {
		evalBuiltinSet[b] = true
	}
	for _, f := range evalFrameAttributes {
		evalFrameSet[f] = true
	}
}

// EvalNodes returns every concrete ast node class name of CPython 3.11 to 3.14 that
// eval-syntax accepts by its exact name, sorted.
func EvalNodes() []string {
	out := make([]string, 0, len(evalNodeSet))
	for n := range evalNodeSet {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
