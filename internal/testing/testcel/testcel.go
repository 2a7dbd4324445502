// Package testcel compiles and evaluates the CEL of generated admission objects the
// way the API server does, with k8s.io/apiserver's compilers and the CEL environment
// of its version, for unit and fuzz tests: an expression that does not compile here
// is an object the API server refuses, or a policy that fails every request.
package testcel

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// expression is one expression and the types the API server requires of it, as its
// own accessors (validating.ValidationCondition, patch.ApplyConfigurationCondition,
// ...) declare them: importing those would bring the whole admission plugins.
type expression struct {
	expr  string
	types []*cel.Type
}

func (e *expression) GetExpression() string    { return e.expr }
func (e *expression) ReturnTypes() []*cel.Type { return e.types }

type variable struct {
	expression
	name string
}

func (v *variable) GetName() string { return v.name }

func boolean(expr string) *expression { return &expression{expr, []*cel.Type{cel.BoolType}} }
func text(expr string) *expression    { return &expression{expr, []*cel.Type{cel.StringType}} }

func applyConfiguration(expr string) *expression {
	return &expression{expr, []*cel.Type{celtypes.NewObjectType("Object")}}
}

func jsonPatch(expr string) *expression {
	return &expression{expr, []*cel.Type{cel.ListType(celtypes.NewObjectType("JSONPatch"))}}
}

// envSet is the environment of expressions written now (the API server compiles a
// new or changed object's expressions in it, the strictest of its environments).
var envSet = sync.OnceValue(func() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
})

const mode = environment.NewExpressions

func check(what string, r plugincel.CompilationResult) error {
	if r.Error != nil {
		return fmt.Errorf("%s %q: %s", what, r.ExpressionAccessor.GetExpression(), r.Error.Detail)
	}
	return nil
}

// variables compiles a policy's variables in order, each seeing the ones before.
func variables(c *plugincel.CompositedCompiler, vars []admissionv1.Variable, opts plugincel.OptionalVariableDeclarations) error {
	var errs []error
	for _, v := range vars {
		r := c.CompileAndStoreVariable(&variable{expression{v.Expression, []*cel.Type{cel.AnyType, cel.DynType}}, v.Name}, opts, mode)
		errs = append(errs, check("variable "+v.Name, r))
	}
	return errors.Join(errs...)
}

// compileCommon starts the compilation of a policy: its compiler and options, and
// the errors of its variables and match conditions.
func compileCommon(hasParams bool, vars []admissionv1.Variable, conds []admissionv1.MatchCondition) (*plugincel.CompositedCompiler, plugincel.OptionalVariableDeclarations, []error, error) {
	opts := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	c, err := plugincel.NewCompositedCompiler(envSet())
	if err != nil {
		return nil, opts, nil, err
	}
	errs := []error{variables(c, vars, opts)}
	for i := range conds {
		errs = append(errs, check("matchCondition", c.CompileCELExpression(boolean(conds[i].Expression), opts, mode)))
	}
	return c, opts, errs, nil
}

// ValidatingAdmissionPolicy compiles every expression of spec: variables, match
// conditions, validations and their message expressions, audit annotations.
func ValidatingAdmissionPolicy(spec *admissionv1.ValidatingAdmissionPolicySpec) error {
	c, opts, errs, err := compileCommon(spec.ParamKind != nil, spec.Variables, spec.MatchConditions)
	if err != nil {
		return err
	}
	msgOpts := opts
	msgOpts.HasAuthorizer = false
	for _, v := range spec.Validations {
		errs = append(errs, check("validation", c.CompileCELExpression(boolean(v.Expression), opts, mode)))
		if v.MessageExpression != "" {
			errs = append(errs, check("messageExpression", c.CompileCELExpression(text(v.MessageExpression), msgOpts, mode)))
		}
	}
	for _, a := range spec.AuditAnnotations {
		errs = append(errs, check("auditAnnotation", c.CompileCELExpression(&expression{a.ValueExpression, []*cel.Type{cel.StringType, cel.NullType}}, opts, mode)))
	}
	return errors.Join(errs...)
}

// MutatingAdmissionPolicy compiles every expression of spec: variables, match
// conditions and mutations (apply configurations and JSON patches).
func MutatingAdmissionPolicy(spec *admissionv1.MutatingAdmissionPolicySpec) error {
	c, opts, errs, err := compileCommon(spec.ParamKind != nil, spec.Variables, spec.MatchConditions)
	if err != nil {
		return err
	}
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	for _, m := range spec.Mutations {
		switch {
		case m.ApplyConfiguration != nil:
			errs = append(errs, check("applyConfiguration", c.CompileCELExpression(applyConfiguration(m.ApplyConfiguration.Expression), patchOpts, mode)))
		case m.JSONPatch != nil:
			errs = append(errs, check("jsonPatch", c.CompileCELExpression(jsonPatch(m.JSONPatch.Expression), patchOpts, mode)))
		default:
			errs = append(errs, fmt.Errorf("mutation of patchType %q has no expression", m.PatchType))
		}
	}
	return errors.Join(errs...)
}

// MatchConditions compiles a webhook's match conditions.
func MatchConditions(conds []admissionv1.MatchCondition) error {
	c := plugincel.NewCompiler(envSet())
	opts := plugincel.OptionalVariableDeclarations{HasAuthorizer: true}
	var errs []error
	for i := range conds {
		errs = append(errs, check("matchCondition", c.CompileCELExpression(boolean(conds[i].Expression), opts, mode)))
	}
	return errors.Join(errs...)
}

// Eval compiles expr in the API server's environment with vars' names declared (of
// dynamic type: object, variables, a value ...), evaluates it with vars, and stores
// the result in into, a pointer to a Go value of the result's type (*bool,
// *[]string, ...).
func Eval(expr string, vars map[string]any, into any) error {
	env, err := envSet().Env(mode)
	if err != nil {
		return err
	}
	var decls []cel.EnvOption
	for name := range vars {
		decls = append(decls, cel.Variable(name, cel.DynType))
	}
	if env, err = env.Extend(decls...); err != nil {
		return err
	}
	ast, issues := env.Compile(expr)
	if issues.Err() != nil {
		return issues.Err()
	}
	prg, err := env.Program(ast)
	if err != nil {
		return err
	}
	out, _, err := prg.Eval(vars)
	if err != nil {
		return err
	}
	ptr := reflect.ValueOf(into)
	v, err := out.ConvertToNative(ptr.Type().Elem())
	if err != nil {
		return err
	}
	ptr.Elem().Set(reflect.ValueOf(v))
	return nil
}
