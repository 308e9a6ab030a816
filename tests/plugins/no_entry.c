/* A shared library that is not a capcheck plugin (it lacks capcheck_provider_v1). */
__attribute__((visibility("default"))) int not_a_capcheck_plugin(void)
{
    return 42;
}
